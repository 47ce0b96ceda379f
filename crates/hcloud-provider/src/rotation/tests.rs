//! Reading the credential files through a Secret volume's symlinks, as the kubelet lays them
//! out and swaps them.

use secrecy::{ExposeSecret, SecretString};
use test_harness::SecretVolume;

use super::decide::Read;
use super::read::{RobotPair, Source, Token, read_robot, read_token};

fn token(read: Read<Token>) -> String {
    match read {
        Read::Value(t) => t.0.expose_secret().to_owned(),
        other => panic!("expected a token, got {other:?}"),
    }
}

fn pair(read: Read<RobotPair>) -> (String, String) {
    match read {
        Read::Value(p) => (p.user, p.password.expose_secret().to_owned()),
        other => panic!("expected a pair, got {other:?}"),
    }
}

#[test]
fn the_token_is_read_anew_through_the_symlinks_after_each_swap() {
    let mut volume = SecretVolume::new(&[("token", "old-token\n")]).expect("volume");
    let path = volume.path("token");
    assert_eq!(token(read_token(&path)), "old-token", "trimmed");
    volume.update(&[("token", "  new-token  ")]).expect("swap");
    assert_eq!(token(read_token(&path)), "new-token");
    volume.update(&[("token", "third")]).expect("swap");
    assert_eq!(token(read_token(&path)), "third");
}

#[test]
fn a_file_without_a_usable_token_is_invalid_or_unreadable_and_never_shown() {
    let mut volume = SecretVolume::new(&[("token", "  \n")]).expect("volume");
    let path = volume.path("token");
    let Read::Invalid(why) = read_token(&path) else { panic!("empty") };
    assert!(why.starts_with("HCLOUD_TOKEN_FILE: the token in ") && why.ends_with(" is empty"), "{why}");
    volume.update(&[("token", "secret-part other-part")]).expect("swap");
    let Read::Invalid(why) = read_token(&path) else { panic!("two words") };
    assert!(why.ends_with("contains whitespace; expected a single API token") && !why.contains("secret-part"), "{why}");
    volume.update(&[("other", "x")]).expect("the key is gone from the Secret");
    let Read::Unreadable(why) = read_token(&path) else { panic!("gone") };
    assert!(why.starts_with("HCLOUD_TOKEN_FILE: cannot read "), "{why}");
    let token = Token(SecretString::from("a"));
    assert_eq!(format!("{token:?}"), "Token([redacted])");
}

#[test]
fn the_robot_pair_takes_each_part_from_its_file_or_keeps_the_fixed_one() {
    let mut volume = SecretVolume::new(&[("robot-user", "u1\n"), ("robot-password", "p1\n")]).expect("volume");
    let (user, password) = (Source::File(volume.path("robot-user")), Source::File(volume.path("robot-password")));
    let in_use = RobotPair { user: "u0".into(), password: SecretString::from("p0") };
    assert_eq!(pair(read_robot(&user, &password, &in_use)), ("u1".into(), "p1".into()));
    volume.update(&[("robot-user", "u2"), ("robot-password", "p2")]).expect("swap");
    assert_eq!(pair(read_robot(&user, &password, &in_use)), ("u2".into(), "p2".into()), "both from one swap");
    assert_eq!(pair(read_robot(&Source::Fixed, &password, &in_use)), ("u0".into(), "p2".into()), "a fixed user");
    assert_eq!(pair(read_robot(&user, &Source::Fixed, &in_use)), ("u2".into(), "p0".into()), "a fixed password");
    volume.update(&[("robot-user", "u3"), ("robot-password", " ")]).expect("swap");
    let Read::Invalid(why) = read_robot(&user, &password, &in_use) else { panic!("empty password") };
    assert!(why.starts_with("ROBOT_PASSWORD_FILE: ") && why.ends_with(" is empty"), "{why}");
    assert!(!format!("{in_use:?}").contains("p0"));
}

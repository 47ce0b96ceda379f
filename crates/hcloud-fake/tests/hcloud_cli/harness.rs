//! Running the CLI: a private config (its contexts), one step per run, counted assertions.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;

/// A token the CLI accepts (it checks for exactly 64 characters).
pub const TOKEN: &str = "clitoken00000000000000000000000000000000000000000000000000000000";
/// The scenario must run at least this many steps and this many assertions.
pub const MIN_STEPS: usize = 40;
pub const MIN_ASSERTIONS: usize = 120;
/// No single CLI run may take longer (the fake's actions take 20 ms).
pub const STEP_TIMEOUT: Duration = Duration::from_secs(60);

pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// What one CLI run printed.
pub struct Output {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

/// The CLI with a private config file (its contexts), run against the fake.
pub struct Cli {
    binary: PathBuf,
    pub config: PathBuf,
    _dir: tempfile::TempDir,
    /// `hcloud <args>` of the step running now, for failure messages.
    pub current: String,
    pub assertions: usize,
    pub failures: Vec<String>,
    pub steps: usize,
    /// Steps that expected the CLI to fail ([`Cli::fails`]).
    pub expected_failures: usize,
}

/// A failed check inside a step.
pub type Check = Result<(), String>;

impl Cli {
    pub fn new(binary: PathBuf) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let config = dir.path().join("cli.toml");
        Self {
            binary,
            config,
            _dir: dir,
            current: String::new(),
            assertions: 0,
            failures: Vec::new(),
            steps: 0,
            expected_failures: 0,
        }
    }

    /// Runs `hcloud --config <ours> <args>` with only the environment we give it (no
    /// `HCLOUD_*` from the test process), `extra_env` added.
    pub async fn run_with_env(&mut self, args: &[&str], extra_env: &[(&str, &str)]) -> Output {
        self.current = format!("hcloud {}", args.join(" "));
        let mut cmd = tokio::process::Command::new(&self.binary);
        cmd.arg("--config").arg(&self.config).args(args);
        cmd.env_clear().env("PATH", std::env::var_os("PATH").unwrap_or_default()).env("HOME", self._dir.path());
        cmd.env("NO_COLOR", "1");
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        cmd.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
        let child = cmd.spawn().unwrap_or_else(|e| panic!("cannot start {}: {e}", self.binary.display()));
        let out = tokio::time::timeout(STEP_TIMEOUT, child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("`{}` did not finish within {STEP_TIMEOUT:?}", self.current))
            .expect("the CLI ran");
        Output {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    pub async fn run(&mut self, args: &[&str]) -> Output {
        self.run_with_env(args, &[]).await
    }

    /// Runs a step: the CLI must succeed; `check` then inspects what it printed.
    pub async fn step(&mut self, args: &[&str], check: impl FnOnce(&Output, &mut Asserts) -> Check) {
        let out = self.run(args).await;
        self.finish_step(out, check);
    }

    /// [`Cli::step`] with `-o json` appended; `check` gets the parsed document.
    pub async fn json(&mut self, args: &[&str], check: impl FnOnce(&Value, &mut Asserts) -> Check) {
        let mut all = args.to_vec();
        all.extend_from_slice(&["-o", "json"]);
        let out = self.run(&all).await;
        self.finish_step(out, |out, a| {
            let doc: Value = serde_json::from_str(&out.stdout)
                .map_err(|e| format!("the output is not JSON ({e}): {}", out.stdout))?;
            check(&doc, a)
        });
    }

    /// Runs `hcloud <args> -o json` until `ready` holds for what it prints (for a command
    /// whose action the CLI does not wait for), at most 10 s; the step that follows asserts.
    pub async fn poll_json(&mut self, args: &[&str], ready: impl Fn(&Value) -> bool) {
        let mut all = args.to_vec();
        all.extend_from_slice(&["-o", "json"]);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            let out = self.run(&all).await;
            if serde_json::from_str::<Value>(&out.stdout).is_ok_and(|doc| ready(&doc)) {
                return;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
    }

    /// A step that must fail (the CLI's exit status is not 0); `check` inspects stderr.
    pub async fn fails(&mut self, args: &[&str], check: impl FnOnce(&Output, &mut Asserts) -> Check) {
        let out = self.run(args).await;
        self.steps += 1;
        self.expected_failures += 1;
        let mut asserts = Asserts::default();
        let result = if out.ok {
            Err(format!("expected a failure, it succeeded: {}", out.stdout))
        } else {
            check(&out, &mut asserts)
        };
        self.record(result, &out, asserts);
    }

    pub fn finish_step(&mut self, out: Output, check: impl FnOnce(&Output, &mut Asserts) -> Check) {
        self.steps += 1;
        let mut asserts = Asserts::default();
        let result = if out.ok { check(&out, &mut asserts) } else { Err("the CLI failed".to_owned()) };
        self.record(result, &out, asserts);
    }

    pub fn record(&mut self, result: Check, out: &Output, asserts: Asserts) {
        self.assertions += asserts.0;
        match result {
            Ok(()) => println!("ok    {} ({} assertions)", self.current, asserts.0),
            Err(e) => {
                println!("FAIL  {}: {e}", self.current);
                self.failures.push(format!(
                    "`{}`: {e}\n      stdout: {}\n      stderr: {}",
                    self.current,
                    out.stdout.trim(),
                    out.stderr.trim()
                ));
            }
        }
    }
}

/// Counts assertions of a step.
#[derive(Default)]
pub struct Asserts(pub usize);

impl Asserts {
    pub fn eq<T: PartialEq + std::fmt::Debug>(&mut self, what: &str, actual: T, expected: T) -> Check {
        self.0 += 1;
        if actual == expected { Ok(()) } else { Err(format!("{what}: got {actual:?}, expected {expected:?}")) }
    }

    pub fn that(&mut self, what: &str, ok: bool) -> Check {
        self.0 += 1;
        if ok { Ok(()) } else { Err(format!("not true: {what}")) }
    }

    pub fn contains(&mut self, what: &str, haystack: &str, needle: &str) -> Check {
        self.0 += 1;
        if haystack.contains(needle) { Ok(()) } else { Err(format!("{what} lacks {needle:?}: {haystack}")) }
    }
}

pub fn s(v: &Value) -> &str {
    v.as_str().unwrap_or_default()
}

/// Names of the objects of a JSON array, sorted.
pub fn names(doc: &Value) -> Vec<String> {
    let mut names: Vec<String> =
        doc.as_array().map(|a| a.iter().map(|o| s(&o["name"]).to_owned()).collect()).unwrap_or_default();
    names.sort();
    names
}

/// The rows of a `-o columns=...` table without its header, split on whitespace.
pub fn rows(out: &str) -> Vec<Vec<String>> {
    out.lines().skip(1).map(|l| l.split_whitespace().map(str::to_owned).collect()).collect()
}

//! Log set-up: `tracing` to stderr, plain or JSON, verbosity like klog's `-v`, `RUST_LOG`
//! overriding it. Plain logs carry ANSI colours only when stderr is a terminal and `NO_COLOR`
//! is unset, so `kubectl logs` never shows escape sequences.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::args::LogFormat;
use crate::options::LoggingOptions;

/// Filter directives for a verbosity; `crates` are the program's own crates (made more verbose
/// from `-v=2` on).
pub fn default_directives(verbosity: u8, crates: &[&str]) -> String {
    let level = match verbosity {
        0 | 1 => return "info".to_owned(),
        2..=4 => "debug",
        _ => "trace",
    };
    let base = if verbosity >= 5 { "debug" } else { "info" };
    std::iter::once(base.to_owned()).chain(crates.iter().map(|c| format!("{c}={level}"))).collect::<Vec<_>>().join(",")
}

/// `--vmodule` as `tracing` filter directives (`target=level`).
pub fn vmodule_directives(options: &LoggingOptions) -> Vec<String> {
    options.vmodule.iter().map(|v| format!("{}={}", v.target, level_name(v.verbosity))).collect()
}

/// The `tracing` level of a klog verbosity: 0-1 info, 2-4 debug, 5+ trace.
pub fn level_name(verbosity: u8) -> &'static str {
    match verbosity {
        0 | 1 => "info",
        2..=4 => "debug",
        _ => "trace",
    }
}

/// Whether plain logs should be coloured: only on a terminal, and never with `NO_COLOR` set
/// to a non-empty value (<https://no-color.org>).
pub fn use_color(is_terminal: bool, no_color: Option<&str>) -> bool {
    is_terminal && no_color.is_none_or(str::is_empty)
}

/// Installs the global subscriber. `crates` get `-v` treatment; `extra` directives (e.g. a
/// provider's wire log) are added last. An unparsable `RUST_LOG` is reported and ignored.
pub fn init(options: LoggingOptions, crates: &[&str], extra: &[&str]) {
    let default = default_directives(options.verbosity, crates);
    let mut filter = match std::env::var("RUST_LOG") {
        Ok(v) if !v.trim().is_empty() => EnvFilter::try_new(&v).unwrap_or_else(|e| {
            eprintln!("ignoring RUST_LOG={v:?}: {e}");
            EnvFilter::new(&default)
        }),
        _ => EnvFilter::new(&default),
    };
    for directive in vmodule_directives(&options).into_iter().chain(extra.iter().map(|d| (*d).to_owned())) {
        if let Ok(d) = directive.parse() {
            filter = filter.add_directive(d);
        }
    }
    let color = use_color(std::io::stderr().is_terminal(), std::env::var("NO_COLOR").ok().as_deref());
    let builder = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr);
    match options.format {
        LogFormat::Plain => builder.with_ansi(color).init(),
        LogFormat::Json => builder.with_ansi(false).json().init(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colour_only_on_a_terminal_without_no_color() {
        assert!(use_color(true, None));
        assert!(use_color(true, Some("")));
        assert!(!use_color(true, Some("1")));
        assert!(!use_color(false, None));
    }

    #[test]
    fn vmodule_entries_become_filter_directives() {
        let options = LoggingOptions {
            format: LogFormat::Plain,
            verbosity: 0,
            vmodule: vec![
                crate::args::VmoduleDirective { target: "cloud_controllers::route".to_owned(), verbosity: 4 },
                crate::args::VmoduleDirective { target: "controller_runtime".to_owned(), verbosity: 6 },
            ],
        };
        let directives = vmodule_directives(&options);
        assert_eq!(directives, vec!["cloud_controllers::route=debug", "controller_runtime=trace"]);
        for d in directives {
            assert!(d.parse::<tracing_subscriber::filter::Directive>().is_ok(), "{d}");
        }
    }

    #[test]
    fn verbosity_raises_the_programs_own_crates() {
        assert_eq!(default_directives(0, &["a", "b"]), "info");
        assert_eq!(default_directives(2, &["a", "b"]), "info,a=debug,b=debug");
        assert_eq!(default_directives(6, &["a"]), "debug,a=trace");
    }
}

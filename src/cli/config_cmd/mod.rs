//! The `config check` and `config show` subcommands: they print and return the exit code.
//! They live with the other commands, not in `config`, because the check also runs the
//! gateway's start-up validation and masks secrets with the logging redactor.

use std::collections::BTreeMap;
use std::io::{self, Write};

use crate::config::{EXIT_CONFIG, LoadedConfig, load};
use crate::home::HermesHome;

/// EX_SOFTWARE: the configuration was fine but could not be printed.
const EXIT_INTERNAL: i32 = 70;

/// `hermesd config check`: "config ok" on stdout and warnings on stderr → 0; otherwise every
/// error on stderr → [`EXIT_CONFIG`]. With `strict`, warnings fail the check too.
pub fn check(home: &HermesHome, env: &BTreeMap<String, String>, strict: bool) -> i32 {
    let (mut out, mut err) = (io::stdout().lock(), io::stderr().lock());
    if strict {
        return check_strict_to(home, env, &mut out, &mut err);
    }
    check_to(home, env, &mut out, &mut err)
}

/// `config check --strict`: a configuration that loads but carries warnings (an unknown key,
/// a setting hermesd does not support yet) is refused with [`EXIT_CONFIG`], so a deployment
/// pipeline can insist that every setting it writes takes effect.
pub(crate) fn check_strict_to(
    home: &HermesHome,
    env: &BTreeMap<String, String>,
    out: &mut impl Write,
    err: &mut impl Write,
) -> i32 {
    match loaded_or_report(home, env, err) {
        Ok(loaded) if loaded.warnings.is_empty() => {
            report_platform_errors(home, &loaded, err).unwrap_or_else(|| say_ok(out))
        }
        Ok(loaded) => {
            let _ = writeln!(
                err,
                "error: --strict: {} warning(s) above; every setting must be known and take effect",
                loaded.warnings.len()
            );
            EXIT_CONFIG
        }
        Err(code) => code,
    }
}

/// `hermesd config show [--json]`: the effective configuration as YAML (or JSON), with every
/// token and API key shown as `***`.
pub fn show(home: &HermesHome, env: &BTreeMap<String, String>, json: bool) -> i32 {
    show_to(
        home,
        env,
        json,
        &mut io::stdout().lock(),
        &mut io::stderr().lock(),
    )
}

pub(crate) fn loaded_or_report(
    home: &HermesHome,
    env: &BTreeMap<String, String>,
    err: &mut impl Write,
) -> Result<LoadedConfig, i32> {
    match load(home, env) {
        Ok(loaded) => {
            for warning in &loaded.warnings {
                // A closed stderr must not turn a valid config into a failure.
                let _ = writeln!(err, "warning: {warning}");
            }
            Ok(loaded)
        }
        Err(errors) => {
            let _ = writeln!(err, "{}", crate::logging::mask(&errors.to_string()));
            Err(EXIT_CONFIG)
        }
    }
}

/// "config ok" on stdout → 0 (or [`EXIT_INTERNAL`] when stdout is gone).
fn say_ok(out: &mut impl Write) -> i32 {
    match writeln!(out, "config ok") {
        Ok(()) => 0,
        Err(_) => EXIT_INTERNAL,
    }
}

pub(crate) fn check_to(
    home: &HermesHome,
    env: &BTreeMap<String, String>,
    out: &mut impl Write,
    err: &mut impl Write,
) -> i32 {
    match loaded_or_report(home, env, err) {
        Ok(loaded) => report_platform_errors(home, &loaded, err).unwrap_or_else(|| say_ok(out)),
        Err(code) => code,
    }
}

/// Runs the platform validation `hermesd run` does before serving; prints what it refuses
/// and returns [`EXIT_CONFIG`] (the code `run` would exit with), or `None` when it passes.
fn report_platform_errors(
    home: &HermesHome,
    loaded: &LoadedConfig,
    err: &mut impl Write,
) -> Option<i32> {
    let errors = crate::gateway::preflight::platform_errors(home, loaded);
    if errors.is_empty() {
        return None;
    }
    for error in &errors {
        let _ = writeln!(
            err,
            "{}",
            crate::logging::mask(&format!("config error: {error}"))
        );
    }
    Some(EXIT_CONFIG)
}

pub(crate) fn show_to(
    home: &HermesHome,
    env: &BTreeMap<String, String>,
    json: bool,
    out: &mut impl Write,
    err: &mut impl Write,
) -> i32 {
    let loaded = match loaded_or_report(home, env, err) {
        Ok(loaded) => loaded,
        Err(code) => return code,
    };
    let rendered = if json {
        serde_json::to_string_pretty(&loaded.config)
            .map(|text| text + "\n")
            .map_err(|error| error.to_string())
    } else {
        serde_norway::to_string(&loaded.config).map_err(|error| error.to_string())
    };
    match rendered {
        Ok(text) => match out.write_all(text.as_bytes()) {
            Ok(()) => 0,
            Err(_) => EXIT_INTERNAL,
        },
        Err(error) => {
            let _ = writeln!(err, "cannot render the configuration: {error}");
            EXIT_INTERNAL
        }
    }
}

#[cfg(test)]
mod tests;

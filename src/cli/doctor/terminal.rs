//! The terminal backend in `hermesd doctor`: which one `terminal:` selects, where commands
//! start, and (unless `--offline`) whether it can be reached: bubblewrap starts a sandbox,
//! the container engine answers, the SSH host accepts the key and its host key is known.

use std::time::Duration;

use super::check::Check;
use crate::config::{LoadedConfig, SandboxScope};

pub fn checks(
    loaded: &LoadedConfig,
    home: &crate::home::HermesHome,
    offline: bool,
    timeout: Duration,
) -> Vec<Check> {
    let mut terminal = loaded.config.terminal.clone();
    crate::agent::workdir::resolve_for_gateway(&mut terminal, &loaded.env);
    let scope = match terminal.sandbox_scope {
        SandboxScope::Shared => "shared by every chat",
        SandboxScope::Chat => "one per chat",
        SandboxScope::User => "one per person",
    };
    let start = terminal
        .cwd
        .clone()
        .unwrap_or_else(|| "the backend's default".to_owned());
    let Some(sandboxes) = crate::tools::backend::sandboxes(&terminal, home.path(), &loaded.env)
    else {
        return vec![Check::ok(
            "terminal",
            format!("local: commands run on this host as the daemon's user, starting in {start}"),
        )];
    };
    let name = format!("terminal.{}", terminal.backend.name());
    if offline {
        return vec![Check::skip(
            &name,
            format!(
                "{} backend ({scope}); not contacted (--offline)",
                sandboxes.kind()
            ),
        )];
    }
    let runtime = match super::super::small_runtime() {
        Ok(runtime) => runtime,
        Err(e) => return vec![Check::warn(&name, format!("not checked: {e}"))],
    };
    let probed = runtime.block_on(async {
        tokio::time::timeout(
            timeout.max(Duration::from_secs(10)),
            sandboxes.factory().probe(),
        )
        .await
    });
    vec![match probed {
        Ok(Ok(line)) => Check::ok(&name, format!("{line}; sandboxes {scope}")),
        Ok(Err(e)) => Check::error(&name, e.to_string()).hint(
            "the terminal and file tools refuse to run until this is fixed; see docs/sandboxes.md",
        ),
        Err(_) => Check::error(&name, "did not answer in time")
            .hint("check that the engine or host is up; see docs/sandboxes.md"),
    }]
}

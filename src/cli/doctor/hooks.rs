//! The operator's hooks in `hermesd doctor`: each configured shell hook and each gateway
//! hook under `$HERMES_HOME/hooks/`, and whether it has the operator's consent (a hook
//! without it does not run), plus whether its script can be found.

use std::path::PathBuf;

use super::check::Check;
use crate::config::LoadedConfig;
use crate::home::HermesHome;
use crate::hooks::allowlist::{expand_tilde, script_of};
use crate::hooks::gateway_hooks::discover;
use crate::hooks::{Consent, consent_of};

const ACCEPT_HINT: &str = "approve it with `hermesd hooks accept` (or set hooks_auto_accept: \
                           true), then reload the daemon";

pub fn checks(loaded: &LoadedConfig, home: &HermesHome) -> Vec<Check> {
    let hooks = &loaded.config.hooks;
    let user_home = loaded.env.get("HOME").map(PathBuf::from);
    let mut checks = Vec::new();
    for (spec, consent) in consent_of(hooks, home) {
        let key = format!("hooks.{}", spec.event);
        let missing_script = script_of(&spec.command)
            .map(|script| expand_tilde(&script, user_home.as_deref()))
            .filter(|path| path.is_absolute() && !path.exists());
        let check = match (consent, hooks.auto_accept, missing_script) {
            (_, _, Some(path)) => Check::error(
                &key,
                format!("{}: {} does not exist", spec.command, path.display()),
            ),
            (Consent::Approved, _, None) => Check::ok(&key, format!("{} (approved)", spec.command)),
            (Consent::Missing, true, None) => Check::ok(
                &key,
                format!(
                    "{} (approved at start-up by hooks_auto_accept)",
                    spec.command
                ),
            ),
            (Consent::Missing, false, None) => Check::warn(
                &key,
                format!(
                    "{} is not approved by the operator: it does not run",
                    spec.command
                ),
            )
            .hint(ACCEPT_HINT),
        };
        checks.push(check);
    }
    for hook in discover(home) {
        let key = format!("hooks/{}", hook.name);
        let events = hook.events.join(", ");
        checks.push(if hook.approved {
            Check::ok(&key, format!("gateway hook for {events} (approved)"))
        } else {
            Check::warn(
                &key,
                format!(
                    "gateway hook for {events} is not approved by the operator: it does not run"
                ),
            )
            .hint(ACCEPT_HINT)
        });
    }
    checks
}

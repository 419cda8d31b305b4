//! What a run does before its agent, as the reference does it: the job's `script` runs
//! first (`crate::cron::script`). A `no_agent` job is then finished — the script's stdout is
//! the message, an empty one or a `{"wakeAgent": false}` last line is a silent run, a
//! failure is delivered as an alert. For an agent job, a silent script skips the agent, and
//! otherwise its output (or its failure, for the agent to report) goes ahead of the prompt.
//! Also the job's own `base_url`, accepted only where the provider's key may be sent.

use std::collections::BTreeMap;
use std::time::Duration;

use super::RunResult;
use crate::agent::provider::ModelClient;
use crate::cron::JobRecord;
use crate::cron::output::SILENT_MARKER;
use crate::cron::script;
use crate::home::HermesHome;

/// Whether a stored flag is set (`true`, or a truthy string/number a hand edit may leave).
fn flag(job: &JobRecord, key: &str) -> bool {
    match job.get(key) {
        Some(serde_json::Value::Bool(b)) => *b,
        Some(serde_json::Value::String(s)) => {
            matches!(s.trim().to_ascii_lowercase().as_str(), "true" | "1" | "yes")
        }
        Some(serde_json::Value::Number(n)) => n.as_i64().is_some_and(|n| n != 0),
        _ => false,
    }
}

/// Runs the job's script, if any, in `home` with `env` for at most `limit_secs`. `Err`
/// ends the run with that result; `Ok` is what goes ahead of the prompt (nothing
/// without a script).
pub(super) async fn before_agent(
    home: &HermesHome,
    env: &BTreeMap<String, String>,
    limit_secs: u64,
    job: &JobRecord,
) -> Result<Option<String>, RunResult> {
    let no_agent = flag(job, "no_agent");
    let Some(path) = job.script() else {
        if no_agent {
            return Err(RunResult::Failed(
                "the job is no_agent but has no script to run".into(),
            ));
        }
        return Ok(None);
    };
    let ran = script::run(home, env, path, Duration::from_secs(limit_secs)).await;
    let silent = |output: &str| output.trim().is_empty() || !script::wakes_agent(output);
    match (no_agent, ran) {
        (true, Ok(output)) if silent(&output) => Err(RunResult::Reply(SILENT_MARKER.into())),
        (true, Ok(output)) => Err(RunResult::Reply(output)),
        (true, Err(why)) => Err(RunResult::Alert(format!(
            "⚠️ The script of scheduled job '{}' failed:\n\n{why}",
            job.name()
        ))),
        (false, Ok(output)) if silent(&output) => {
            tracing::info!(
                job_id = job.id(),
                "the job's script had nothing to report; the agent is not run"
            );
            Err(RunResult::Reply(SILENT_MARKER.into()))
        }
        (false, Ok(output)) => Ok(Some(format!(
            "[Output of this job's script, collected just now; use it as the data for the task below.]\n\n```\n{output}\n```"
        ))),
        (false, Err(why)) => Ok(Some(format!(
            "[This job's script failed, so there is no fresh data. Tell the user what went wrong:]\n\n```\n{why}\n```"
        ))),
    }
}

/// A job's own `base_url` on its provider's client. Like the reference, it needs an
/// explicit `provider`, and the key configured for that provider is only ever sent to that
/// provider's own host: another host is refused, so a job (which the agent can write)
/// cannot carry a stored key elsewhere. hermesd has no per-URL key pool, so unlike the
/// reference a bare `custom` provider gets the same host rule.
pub(super) fn with_base_url(
    client: ModelClient,
    provider: Option<&str>,
    base_url: &str,
) -> Result<ModelClient, BaseUrlRefused> {
    let base_url = base_url.trim().trim_end_matches('/');
    let Some(provider) = provider else {
        return Err(BaseUrlRefused::NoProvider {
            base_url: base_url.to_owned(),
        });
    };
    let host = |url: &str| {
        reqwest::Url::parse(url)
            .ok()
            .and_then(|u| u.host_str().map(str::to_ascii_lowercase))
    };
    let configured = client
        .endpoints()
        .first()
        .map(|e| e.base_url.clone())
        .unwrap_or_default();
    match (host(base_url), host(&configured)) {
        (Some(wanted), Some(own)) if wanted == own => Ok(client.with_primary_base_url(base_url)),
        (None, _) => Err(BaseUrlRefused::NotAUrl {
            base_url: base_url.to_owned(),
        }),
        _ => Err(BaseUrlRefused::OtherHost {
            base_url: base_url.to_owned(),
            provider: provider.to_owned(),
            host: host(&configured).unwrap_or_else(|| "unknown".into()),
        }),
    }
}

/// Why a job's own `base_url` was not used.
#[derive(Debug, thiserror::Error)]
pub(super) enum BaseUrlRefused {
    #[error(
        "refused for safety: base_url {base_url:?} needs an explicit provider (the default provider's key is not sent to a job's own URL)"
    )]
    NoProvider { base_url: String },
    #[error("base_url {base_url:?} is not a URL")]
    NotAUrl { base_url: String },
    #[error(
        "refused for safety: base_url {base_url:?} is not on the host of provider {provider:?} ({host}); its key is only sent there"
    )]
    OtherHost {
        base_url: String,
        provider: String,
        host: String,
    },
}

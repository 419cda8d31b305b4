//! The Telegram benchmark's workload against the Python reference gateway (Hermes 0.19 with
//! python-telegram-bot 22.6, `hermes gateway run`), pointed at the same fake Bot API through
//! `extra.base_url` and at the same fake model, with the same quiet window. Used with
//! `-- --python`; any failure is reported in the JSON instead of failing the benchmark.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fake_telegram::{FakeTelegram, TOKEN};
use serde_json::{Value, json};

use crate::fake_model::FakeModel;
use crate::support::bench_dir;

/// Python starts slowly (imports), and more so on a loaded machine.
const START: Duration = Duration::from_secs(120);

struct Gateway(Child);

impl Drop for Gateway {
    fn drop(&mut self) {
        let pid = self.0.id().to_string();
        let _ = Command::new("kill").args(["-TERM", &pid]).status();
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline {
            if matches!(self.0.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn venv() -> PathBuf {
    std::env::var("HERMES_PY_VENV")
        .map(PathBuf::from)
        .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("target/hermes-py"))
}

fn log_tail(path: &Path) -> Vec<String> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<String> = text.lines().map(str::to_owned).collect();
    lines[lines.len().saturating_sub(15)..].to_vec()
}

pub async fn run(model: &FakeModel, users: usize, per_user: usize, model_p50: f64) -> Value {
    let venv = venv();
    let hermes = venv.join("bin/hermes");
    let has_ptb = Command::new(venv.join("bin/python"))
        .args(["-c", "import telegram, gateway"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !hermes.exists() || !has_ptb {
        return json!({"skipped": format!(
            "no Hermes 0.19 with python-telegram-bot in {} (.ci/python-reference, then pip install 'python-telegram-bot[webhooks]==22.6')",
            venv.display())});
    }
    let telegram = Arc::new(FakeTelegram::start().await);
    let home = bench_dir();
    let config = format!(
        "model:\n  default: fake-model\n  provider: custom\n  base_url: {model_url}\n  api_key: sk-bench\n\
         platforms:\n  telegram:\n    enabled: true\n    extra:\n      base_url: {tg}/bot\n      base_file_url: {tg}/file/bot\n",
        model_url = model.base_url(),
        tg = telegram.url(),
    );
    std::fs::write(home.path().join("config.yaml"), config).unwrap();
    let allowed: Vec<String> = (1..=users).map(|u| u.to_string()).collect();
    let log_path = home.path().join("gateway.log");
    let log = std::fs::File::create(&log_path).unwrap();
    let delay = super::BATCH_DELAY_S.to_string();
    let child = Command::new(&hermes)
        .args(["gateway", "run"])
        .env_clear()
        .env("HOME", home.path().join("user"))
        .env("HERMES_HOME", home.path())
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("TELEGRAM_BOT_TOKEN", TOKEN)
        .env("TELEGRAM_ALLOWED_USERS", allowed.join(","))
        .env("OPENAI_BASE_URL", model.base_url())
        .env("OPENAI_API_KEY", "sk-bench")
        .env("HERMES_TELEGRAM_TEXT_BATCH_DELAY_SECONDS", &delay)
        .env("HERMES_TELEGRAM_TEXT_BATCH_SPLIT_DELAY_SECONDS", &delay)
        .stdin(Stdio::null())
        .stdout(log.try_clone().unwrap())
        .stderr(log)
        .spawn();
    let gateway = match child {
        Ok(child) => Gateway(child),
        Err(e) => return json!({"error": format!("cannot start {}: {e}", hermes.display())}),
    };
    let started = Instant::now();
    if let Err(e) = telegram.wait_for_calls("getUpdates", 1, START).await {
        return json!({"error": format!("never polled: {e}"), "log_tail": log_tail(&log_path)});
    }
    let ready_ms = started.elapsed().as_millis();
    let pid = gateway.0.id();
    let mut report = match super::measure(&telegram, pid, users, per_user, model_p50).await {
        Ok(report) => report,
        Err(e) => {
            let sample: Vec<String> = telegram
                .sent_log_from(0)
                .into_iter()
                .take(3)
                .map(|r| r.text)
                .collect();
            return json!({"error": e, "replies_received": telegram.sent_count(),
                "first_replies": sample, "model_requests": model.requests().len(),
                "log_tail": log_tail(&log_path)});
        }
    };
    report["polling_after_ms"] = json!(ready_ms);
    drop(gateway);
    report
}

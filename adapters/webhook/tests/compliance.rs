//! The webhook adapter passes the adapter contract's compliance suite. The "platform" is a
//! sender posting signed events (it retries while the listener answers 503, as a sender
//! redelivers) and, for answers, the fake GitHub REST server comments go to.

#[path = "../../../tests/support/fake_github.rs"]
mod fake_github;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fake_github::FakeGithub;
use hermes_adapter::testing::ComplianceRig;
use hermes_adapter::{Adapter, AdapterContext, AdapterError};
use hermes_webhook::{Settings, WebhookAdapter};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

const SECRET: &str = "compliance-secret";

struct Rig {
    github: FakeGithub,
    adapter: WebhookAdapter,
    run: JoinHandle<Result<(), AdapterError>>,
    shutdown: CancellationToken,
    /// The final HTTP status each delivery got (503s are retried, so never final).
    answered: Arc<Mutex<HashMap<String, u16>>>,
    next: Mutex<u64>,
    url: String,
}

impl Rig {
    fn delivery(&self) -> String {
        let mut next = self.next.lock().unwrap();
        *next += 1;
        format!("delivery-{next}")
    }

    /// Posts `body` signed under `delivery` in the background, again after every 503.
    fn post(&self, delivery: &str, body: Vec<u8>) {
        let (url, answered, delivery) =
            (self.url.clone(), self.answered.clone(), delivery.to_owned());
        tokio::spawn(async move {
            let client = reqwest::Client::new();
            loop {
                let status = client
                    .post(&url)
                    .header("x-github-event", "ping")
                    .header("x-github-delivery", &delivery)
                    .header(
                        "x-hub-signature-256",
                        hermes_webhook::signature::github_signature(SECRET, &body),
                    )
                    .body(body.clone())
                    .send()
                    .await
                    .map(|r| r.status().as_u16())
                    .unwrap_or(503);
                if status != 503 {
                    answered.lock().unwrap().insert(delivery, status);
                    return;
                }
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        });
    }
}

impl ComplianceRig for Rig {
    type Adapter = WebhookAdapter;

    async fn start(ctx: AdapterContext) -> Self {
        let github = FakeGithub::start().await;
        let extra = json!({"host": "127.0.0.1", "port": 0, "secret": SECRET,
            "github_api_url": github.url(), "routes": {"c": {"prompt": "{message}"}}});
        let env = [("GITHUB_TOKEN".to_owned(), fake_github::TOKEN.to_owned())].into();
        let settings = Settings::from_config(
            extra.as_object().unwrap(),
            &env,
            std::env::temp_dir(),
            Default::default(),
        )
        .expect("settings");
        let adapter = WebhookAdapter::new(settings);
        let shutdown = ctx.shutdown.clone();
        let runner = adapter.clone();
        let run = tokio::spawn(async move { runner.run(ctx).await });
        let bound = async {
            loop {
                if let Some(addr) = adapter.local_addr() {
                    return addr;
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        };
        let addr = tokio::time::timeout(Duration::from_secs(30), bound)
            .await
            .expect("the listener binds");
        Self {
            github,
            adapter,
            run,
            shutdown,
            answered: Arc::default(),
            next: Mutex::new(0),
            url: format!("http://{addr}/webhooks/c"),
        }
    }

    fn adapter(&self) -> &WebhookAdapter {
        &self.adapter
    }

    fn target(&self) -> (String, Option<String>) {
        ("github:acme/web#1".into(), None)
    }

    async fn push_message(&self, text: &str) -> String {
        let delivery = self.delivery();
        self.post(
            &delivery,
            serde_json::to_vec(&json!({"message": text})).unwrap(),
        );
        delivery
    }

    async fn push_undecodable(&self) -> String {
        let delivery = self.delivery();
        // Signed, but neither JSON nor form data (not even UTF-8).
        self.post(&delivery, b"\xff\xfe\x00 not a payload".to_vec());
        delivery
    }

    fn acknowledged(&self, delivery: &str) -> Option<bool> {
        Some(self.answered.lock().unwrap().contains_key(delivery))
    }

    fn rate_limit_next_send(&self, retry_after: Duration) {
        self.github
            .fail_next(fake_github::Fault::RetryAfter(retry_after.as_secs()));
    }

    fn shown_text(&self, message_id: &str) -> Option<String> {
        self.github.comment_text(message_id)
    }

    fn shown_buttons(&self, _message_id: &str) -> Vec<String> {
        // A GitHub comment has no buttons.
        Vec::new()
    }

    fn typing_shown(&self) -> usize {
        // GitHub has no typing indicator.
        0
    }

    async fn stop(self) {
        self.shutdown.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(30), self.run).await;
    }
}

hermes_adapter::compliance_suite!(Rig);

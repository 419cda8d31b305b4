//! The WhatsApp Cloud adapter passes the adapter contract's compliance suite against the fake
//! Meta (tests/support/fake_whatsapp.rs): deliveries are signed webhook POSTs that Meta sends
//! again until they are answered 200.

mod support;

use std::time::Duration;

use hermes_adapter::AdapterContext;
use hermes_adapter::testing::ComplianceRig;
use hermes_whatsapp::WhatsAppAdapter;
use support::fake_whatsapp::{self, Fault};
use support::{Running, USER};

struct Rig(Running);

impl ComplianceRig for Rig {
    type Adapter = WhatsAppAdapter;

    async fn start(ctx: AdapterContext) -> Self {
        let running = support::start(ctx).await;
        // The user wrote a moment ago: the service window is open, and typing has a message
        // to attach to.
        running.meta.user_wrote(USER, 0);
        running.meta.known_inbound(USER, "wamid.seed");
        running.adapter.note_inbound(USER, "wamid.seed");
        Rig(running)
    }

    fn adapter(&self) -> &WhatsAppAdapter {
        &self.0.adapter
    }

    fn target(&self) -> (String, Option<String>) {
        (USER.to_owned(), None)
    }

    async fn push_message(&self, text: &str) -> String {
        self.0.meta.push_text(USER, text)
    }

    async fn push_undecodable(&self) -> String {
        let id = "undecodable-1";
        self.0.meta.post(
            id,
            b"\xff\xfe not a notification".to_vec(),
            fake_whatsapp::APP_SECRET,
        );
        id.to_owned()
    }

    fn acknowledged(&self, delivery: &str) -> Option<bool> {
        Some(self.0.meta.answered(delivery) == Some(200))
    }

    fn rate_limit_next_send(&self, retry_after: Duration) {
        self.0
            .meta
            .fail_next(Fault::Throughput(Some(retry_after.as_secs())));
    }

    fn shown_text(&self, message_id: &str) -> Option<String> {
        self.0.meta.find(message_id).map(|s| s.text)
    }

    fn shown_buttons(&self, message_id: &str) -> Vec<String> {
        self.0
            .meta
            .find(message_id)
            .map(|s| s.buttons.into_iter().map(|(label, _)| label).collect())
            .unwrap_or_default()
    }

    fn typing_shown(&self) -> usize {
        self.0.meta.typing_shown()
    }

    async fn stop(self) {
        self.0.stop().await;
    }
}

hermes_adapter::compliance_suite!(Rig);

//! The adapter against the fake Meta: one rig shared by the compliance suite and the
//! adapter's own tests.
#![allow(dead_code)]

#[path = "../../../../tests/support/fake_whatsapp.rs"]
pub mod fake_whatsapp;

use std::time::Duration;

use fake_whatsapp::FakeMeta;
use hermes_adapter::{Adapter, AdapterContext, AdapterError};
use hermes_whatsapp::{Settings, WhatsAppAdapter};
use serde_json::json;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

/// The user every rig talks to.
pub const USER: &str = "4915100000001";

pub struct Running {
    pub meta: FakeMeta,
    pub adapter: WhatsAppAdapter,
    pub run: JoinHandle<Result<(), AdapterError>>,
    pub shutdown: CancellationToken,
    pub cache: tempfile::TempDir,
    pub base: String,
}

/// A fake Meta and the adapter serving its webhook on a free port.
pub async fn start(ctx: AdapterContext) -> Running {
    let meta = FakeMeta::start().await;
    let cache = tempfile::tempdir().unwrap();
    let extra = json!({"phone_number_id": fake_whatsapp::PHONE_NUMBER_ID,
        "access_token": fake_whatsapp::TOKEN, "app_secret": fake_whatsapp::APP_SECRET,
        "verify_token": fake_whatsapp::VERIFY_TOKEN, "webhook_host": "127.0.0.1",
        "webhook_port": 0, "graph_api_url": meta.url()});
    let settings = Settings::from_config(
        extra.as_object().unwrap(),
        &Default::default(),
        cache.path().join("media"),
        hermes_adapter::net::Net::direct(),
    )
    .expect("settings");
    let adapter = WhatsAppAdapter::new(settings);
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
    let base = format!("http://{addr}");
    meta.set_webhook(&format!("{base}/whatsapp/webhook"));
    Running {
        meta,
        adapter,
        run,
        shutdown,
        cache,
        base,
    }
}

impl Running {
    pub async fn stop(self) {
        self.shutdown.cancel();
        let _ = tokio::time::timeout(Duration::from_secs(30), self.run).await;
    }
}

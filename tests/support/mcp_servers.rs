//! Real MCP servers for end-to-end tests: `tests/mcp-server/server.py`, written with the
//! protocol project's Python SDK (`mcp` on PyPI), which `.ci/mcp-test-servers` installs into
//! `target/mcp-py` (once, under a file lock).

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// The python that has the `mcp` SDK.
pub fn python() -> String {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join(".ci/mcp-test-servers");
    let output = Command::new("bash")
        .arg(&script)
        .stderr(Stdio::inherit())
        .output()
        .expect("run .ci/mcp-test-servers");
    assert!(
        output.status.success(),
        "installing the Python MCP SDK (mcp from PyPI) failed"
    );
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

/// The test server's script.
pub fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp-server/server.py")
}

/// The server in Streamable HTTP mode, on a port the OS picked; stopped on drop.
#[derive(Debug)]
pub struct HttpServer {
    child: Child,
    pub url: String,
}

impl HttpServer {
    pub fn start() -> HttpServer {
        Self::start_mode("http")
    }

    /// The legacy HTTP+SSE transport (`/sse`).
    pub fn start_sse() -> HttpServer {
        Self::start_mode("sse")
    }

    fn start_mode(mode: &str) -> HttpServer {
        let mut child = Command::new(python())
            .arg(script())
            .arg(mode)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("start the MCP HTTP server");
        let stdout = child.stdout.take().unwrap();
        let mut line = String::new();
        BufReader::new(stdout).read_line(&mut line).unwrap();
        let url = line
            .trim()
            .strip_prefix("listening ")
            .unwrap_or_else(|| panic!("unexpected first line: {line:?}"))
            .to_owned();
        HttpServer { child, url }
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The tool names the model was offered in request `index` (chat-completions shape).
pub fn offered_tools(model: &super::fake_model::FakeModel, index: usize) -> Vec<String> {
    model.requests()[index].body["tools"]
        .as_array()
        .map(|tools| {
            tools
                .iter()
                .map(|t| t["function"]["name"].as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// One HTTP API chat turn (`/v1/chat/completions`, status 200 asserted); the reply text.
pub async fn api_chat(api_url: &str, key: &str, text: &str) -> String {
    let response = reqwest::Client::builder()
        .timeout(std::time::Duration::from_secs(90))
        .build()
        .unwrap()
        .post(format!("{api_url}/v1/chat/completions"))
        .bearer_auth(key)
        .json(&serde_json::json!({"model": "hermes-agent",
                                  "messages": [{"role": "user", "content": text}]}))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 200);
    let body: serde_json::Value = response.json().await.unwrap();
    body["choices"][0]["message"]["content"]
        .as_str()
        .unwrap()
        .to_owned()
}

//! Real MCP servers for end-to-end tests: `tests/mcp-server/server.py`, written with the
//! protocol project's Python SDK (`mcp` on PyPI), which `.ci/mcp-test-servers` installs into
//! `target/mcp-py` (once, under a file lock).

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
        let mut child = Command::new(python())
            .arg(script())
            .arg("http")
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

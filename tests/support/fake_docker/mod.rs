//! A wire-level fake of the Docker Engine API, version 1.41 (what podman 4 serves and what
//! bollard negotiates down to), on a unix socket: plain HTTP/1.1, one request per connection,
//! JSON bodies, the exec start hijack and its multiplexed stream. Containers do not run
//! anything: the programs hermesd sends through exec are recognised and emulated in
//! `programs.rs`. Faults a test can inject: a container dying mid-exec (OOM), a container
//! removed behind the backend's back, a 500 on the next exec create, a storage driver
//! without a size option.
//!
//! Reference: https://docs.docker.com/reference/api/engine/version/v1.41/

mod programs;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Notify;

pub const IMAGE: &str = "example/sandbox:1";

#[derive(Debug)]
pub struct Container {
    pub id: String,
    pub name: String,
    pub labels: BTreeMap<String, String>,
    /// The create request's body as received.
    pub body: Value,
    pub running: bool,
    pub exit_code: i64,
    pub oom_killed: bool,
    pub files: BTreeMap<String, Vec<u8>>,
    /// Woken when the container stops or is removed (hanging execs end).
    pub death: Arc<Notify>,
}

#[derive(Debug, Clone)]
pub struct ExecRecord {
    pub container: String,
    pub cmd: Vec<String>,
    pub env: Vec<String>,
    pub working_dir: String,
    pub running: bool,
    pub exit_code: Option<i64>,
}

#[derive(Debug, Default)]
pub struct State {
    pub images: HashSet<String>,
    pub containers: BTreeMap<String, Container>,
    pub execs: HashMap<String, ExecRecord>,
    /// `METHOD /path` of every request, version prefix removed.
    pub requests: Vec<String>,
    /// Tokens of the kill programs received.
    pub kills: Vec<String>,
    /// Tokens of the command wrappers received.
    pub wrappers: Vec<String>,
    pub storage_opt_unsupported: bool,
    /// Status to answer the next exec create with.
    pub fail_next_exec_create: Option<u16>,
    /// Wakes a hanging command when its kill program arrives, by token.
    hangs: HashMap<String, Arc<Notify>>,
    next_id: u64,
}

impl State {
    fn new_id(&mut self) -> String {
        self.next_id += 1;
        format!("{:064x}", 0xfeed_0000 + self.next_id)
    }

    /// A container by id, unique id prefix, or name (as the engine resolves them).
    pub fn find(&self, key: &str) -> Option<String> {
        if self.containers.contains_key(key) {
            return Some(key.to_owned());
        }
        self.containers
            .values()
            .find(|c| c.name == key || c.name == format!("/{key}") || c.id.starts_with(key))
            .map(|c| c.id.clone())
    }

    fn hang(&mut self, token: &str) -> Arc<Notify> {
        Arc::clone(self.hangs.entry(token.to_owned()).or_default())
    }

    /// Ends the container: stopped with `code` (and the OOM flag), its execs cut off.
    pub fn kill_container(&mut self, key: &str, code: i64, oom: bool) {
        if let Some(id) = self.find(key) {
            let container = self.containers.get_mut(&id).expect("found");
            container.running = false;
            container.exit_code = code;
            container.oom_killed = oom;
            container.death.notify_waiters();
        }
    }

    /// Removes the container as `DELETE ?force=true` does.
    pub fn remove_container(&mut self, key: &str) -> bool {
        match self.find(key).and_then(|id| self.containers.remove(&id)) {
            Some(container) => {
                container.death.notify_waiters();
                true
            }
            None => false,
        }
    }
}

pub struct FakeDocker {
    pub socket: PathBuf,
    pub state: Arc<Mutex<State>>,
    _dir: tempfile::TempDir,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for FakeDocker {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl FakeDocker {
    pub async fn start() -> FakeDocker {
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = dir.path().join("docker.sock");
        let listener = UnixListener::bind(&socket).expect("bind fake engine");
        let state = Arc::new(Mutex::new(State {
            images: HashSet::from([IMAGE.to_owned()]),
            ..State::default()
        }));
        let shared = Arc::clone(&state);
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let state = Arc::clone(&shared);
                tokio::spawn(async move {
                    let _ = serve(stream, state).await;
                });
            }
        });
        FakeDocker {
            socket,
            state,
            _dir: dir,
            task,
        }
    }

    pub fn host(&self) -> String {
        format!("unix://{}", self.socket.display())
    }

    pub fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().expect("fake state")
    }
}

pub(crate) struct Request {
    method: String,
    path: String,
    query: HashMap<String, String>,
    headers: HashMap<String, String>,
    body: Vec<u8>,
}

async fn read_request(stream: &mut UnixStream) -> std::io::Result<Option<Request>> {
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await? == 0 {
            return Ok(None);
        }
        buf.push(byte[0]);
        if buf.len() > 65_536 {
            return Ok(None);
        }
    }
    let head = String::from_utf8_lossy(&buf).to_string();
    let mut lines = head.split("\r\n");
    let mut first = lines.next().unwrap_or_default().split(' ');
    let method = first.next().unwrap_or_default().to_owned();
    let target = first.next().unwrap_or_default().to_owned();
    let headers: HashMap<String, String> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let length: usize = headers
        .get("content-length")
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await?;
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    // Every endpoint may be prefixed by the API version, `/v1.41/...` (Versioning section).
    let path = match path.strip_prefix("/v") {
        Some(rest) if rest.starts_with(|c: char| c.is_ascii_digit()) => rest
            .find('/')
            .map(|i| rest[i..].to_owned())
            .unwrap_or_default(),
        _ => path.to_owned(),
    };
    let query = query
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (k.to_owned(), percent_decode(v)))
        .collect();
    Ok(Some(Request {
        method,
        path,
        query,
        headers,
        body,
    }))
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
                match u8::from_str_radix(hex, 16) {
                    Ok(b) => {
                        out.push(b);
                        i += 3;
                    }
                    Err(_) => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).to_string()
}

pub(crate) async fn respond(
    stream: &mut UnixStream,
    status: u16,
    body: &Value,
) -> std::io::Result<()> {
    let text = if body.is_null() {
        String::new()
    } else {
        body.to_string()
    };
    let reason = match status {
        200 => "OK",
        201 => "Created",
        204 => "No Content",
        304 => "Not Modified",
        404 => "Not Found",
        409 => "Conflict",
        _ => "Error",
    };
    let head = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        text.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(text.as_bytes()).await?;
    stream.shutdown().await
}

/// Errors carry `{"message": ...}` (ErrorResponse in the reference).
fn error(message: impl Into<String>) -> Value {
    json!({ "message": message.into() })
}

async fn serve(mut stream: UnixStream, state: Arc<Mutex<State>>) -> std::io::Result<()> {
    let Some(request) = read_request(&mut stream).await? else {
        return Ok(());
    };
    let parts: Vec<&str> = request.path.trim_matches('/').split('/').collect();
    let route = format!("{} /{}", request.method, parts.join("/"));
    state.lock().expect("state").requests.push(route);
    let (status, body) = match (request.method.as_str(), parts.as_slice()) {
        // #tag/System/operation/SystemPing: 200 with the body "OK".
        ("GET" | "HEAD", ["_ping"]) => {
            let head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 2\r\nApi-Version: 1.41\r\nConnection: close\r\n\r\nOK";
            stream.write_all(head.as_bytes()).await?;
            return stream.shutdown().await;
        }
        // #tag/System/operation/SystemVersion
        ("GET", ["version"]) => (
            200,
            json!({
                "Version": "20.10.0-fake",
                "ApiVersion": "1.41",
                "MinAPIVersion": "1.12",
                "Os": "linux",
                "Arch": "amd64",
                "Components": [{"Name": "Fake Engine", "Version": "20.10.0-fake"}],
            }),
        ),
        // #tag/Image/operation/ImageCreate: 200 and a stream of JSON progress messages.
        ("POST", ["images", "create"]) => {
            let image = request.query.get("fromImage").cloned().unwrap_or_default();
            state.lock().expect("state").images.insert(image.clone());
            let progress = format!(
                "{{\"status\":\"Pulling from {image}\"}}\n{{\"status\":\"Downloaded newer image for {image}\"}}\n"
            );
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                progress.len()
            );
            stream.write_all(head.as_bytes()).await?;
            stream.write_all(progress.as_bytes()).await?;
            return stream.shutdown().await;
        }
        ("POST", ["containers", "create"]) => create(&state, &request),
        // #tag/Container/operation/ContainerList: `filters` is JSON, `label` entries are
        // `key=value` and all must match; `all` includes stopped containers.
        ("GET", ["containers", "json"]) => {
            let filters: Value = request
                .query
                .get("filters")
                .and_then(|f| serde_json::from_str(f).ok())
                .unwrap_or(Value::Null);
            let wanted: Vec<String> = filters["label"]
                .as_array()
                .map(|l| {
                    l.iter()
                        .filter_map(|v| v.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            let all = request
                .query
                .get("all")
                .is_some_and(|v| v == "true" || v == "1");
            let state = state.lock().expect("state");
            let list: Vec<Value> = state
                .containers
                .values()
                .filter(|c| all || c.running)
                .filter(|c| {
                    wanted.iter().all(|w| match w.split_once('=') {
                        Some((k, v)) => c.labels.get(k).is_some_and(|have| have == v),
                        None => c.labels.contains_key(w.as_str()),
                    })
                })
                .map(|c| {
                    json!({"Id": c.id, "Names": [c.name], "Labels": c.labels,
                           "State": if c.running { "running" } else { "exited" }})
                })
                .collect();
            (200, Value::Array(list))
        }
        ("POST", ["containers", key, "start"]) => {
            // #tag/Container/operation/ContainerStart: 204, 304 if already started, 404.
            let mut state = state.lock().expect("state");
            match state.find(key) {
                Some(id) => {
                    let c = state.containers.get_mut(&id).expect("found");
                    let was = c.running;
                    c.running = true;
                    (if was { 304 } else { 204 }, Value::Null)
                }
                None => (404, error(format!("No such container: {key}"))),
            }
        }
        ("POST", ["containers", key, "stop"]) => {
            // #tag/Container/operation/ContainerStop: 204, 304 if already stopped, 404.
            let mut state = state.lock().expect("state");
            match state.find(key) {
                Some(id) => {
                    let was = state.containers[&id].running;
                    state.kill_container(&id, 0, false);
                    (if was { 204 } else { 304 }, Value::Null)
                }
                None => (404, error(format!("No such container: {key}"))),
            }
        }
        ("DELETE", ["containers", key]) => {
            // #tag/Container/operation/ContainerDelete: 409 for a running container
            // without `force`, 404 when missing, 204 when removed.
            let force = request
                .query
                .get("force")
                .is_some_and(|v| v == "true" || v == "1");
            let mut state = state.lock().expect("state");
            match state.find(key) {
                Some(id) if state.containers[&id].running && !force => (
                    409,
                    error(
                        "You cannot remove a running container. Stop the container before attempting removal or force remove",
                    ),
                ),
                Some(id) => {
                    state.remove_container(&id);
                    (204, Value::Null)
                }
                None => (404, error(format!("No such container: {key}"))),
            }
        }
        ("GET", ["containers", key, "json"]) => {
            // #tag/Container/operation/ContainerInspect
            let state = state.lock().expect("state");
            match state.find(key) {
                Some(id) => {
                    let c = &state.containers[&id];
                    (
                        200,
                        json!({
                            "Id": c.id,
                            "Name": c.name,
                            "State": {
                                "Status": if c.running { "running" } else { "exited" },
                                "Running": c.running,
                                "Paused": false,
                                "Restarting": false,
                                "OOMKilled": c.oom_killed,
                                "Dead": false,
                                "Pid": if c.running { 4242 } else { 0 },
                                "ExitCode": c.exit_code,
                                "Error": "",
                            },
                            "Config": {"Labels": c.labels, "Image": c.body["Image"]},
                            "HostConfig": c.body["HostConfig"],
                        }),
                    )
                }
                None => (404, error(format!("No such container: {key}"))),
            }
        }
        ("POST", ["containers", key, "exec"]) => {
            // #tag/Exec/operation/ContainerExec: 201 {Id}, 404 no such container, 409 the
            // container is paused or not running.
            let config: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
            let mut state = state.lock().expect("state");
            if let Some(status) = state.fail_next_exec_create.take() {
                (status, error("fake engine: injected failure"))
            } else {
                match state.find(key) {
                    None => (404, error(format!("No such container: {key}"))),
                    Some(id) if !state.containers[&id].running => {
                        (409, error(format!("Container {id} is not running")))
                    }
                    Some(id) => {
                        let strings = |v: &Value| -> Vec<String> {
                            v.as_array()
                                .map(|a| {
                                    a.iter()
                                        .filter_map(|s| s.as_str().map(str::to_owned))
                                        .collect()
                                })
                                .unwrap_or_default()
                        };
                        let exec_id = state.new_id();
                        state.execs.insert(
                            exec_id.clone(),
                            ExecRecord {
                                container: id,
                                cmd: strings(&config["Cmd"]),
                                env: strings(&config["Env"]),
                                working_dir: config["WorkingDir"]
                                    .as_str()
                                    .unwrap_or("/")
                                    .to_owned(),
                                running: false,
                                exit_code: None,
                            },
                        );
                        (201, json!({ "Id": exec_id }))
                    }
                }
            }
        }
        ("POST", ["exec", exec_id, "start"]) => {
            return programs::start(stream, state, exec_id, &request).await;
        }
        ("GET", ["exec", exec_id, "json"]) => {
            // #tag/Exec/operation/ExecInspect
            let state = state.lock().expect("state");
            match state.execs.get(*exec_id) {
                Some(e) => (
                    200,
                    json!({
                        "ID": exec_id,
                        "ContainerID": e.container,
                        "Running": e.running,
                        "ExitCode": e.exit_code,
                        "Pid": 0,
                        "OpenStdin": false, "OpenStdout": true, "OpenStderr": true,
                        "ProcessConfig": {"entrypoint": e.cmd.first(), "arguments": e.cmd.get(1..), "tty": false, "privileged": false},
                    }),
                ),
                None => (404, error(format!("No such exec instance: {exec_id}"))),
            }
        }
        _ => (404, error("page not found")),
    };
    respond(&mut stream, status, &body).await
}

/// #tag/Container/operation/ContainerCreate: 201 {Id, Warnings}; 404 when the image is not
/// present (the client pulls it); 409 when the name is in use. With a storage driver that
/// has no size option the engine refuses `StorageOpt.size` (Docker's overlay2 outside XFS
/// with pquota answers 500 with this message).
fn create(state: &Mutex<State>, request: &Request) -> (u16, Value) {
    let body: Value = match serde_json::from_slice(&request.body) {
        Ok(body) => body,
        Err(e) => return (400, error(format!("bad JSON: {e}"))),
    };
    let mut state = state.lock().expect("state");
    let image = body["Image"].as_str().unwrap_or_default().to_owned();
    if !state.images.contains(&image) {
        return (404, error(format!("No such image: {image}")));
    }
    let name = format!(
        "/{}",
        request.query.get("name").cloned().unwrap_or_default()
    );
    if state.containers.values().any(|c| c.name == name) {
        return (
            409,
            error(format!(
                "Conflict. The container name \"{name}\" is already in use"
            )),
        );
    }
    if state.storage_opt_unsupported && body["HostConfig"]["StorageOpt"].is_object() {
        return (
            500,
            error(
                "--storage-opt is supported only for overlay over xfs with 'pquota' mount option",
            ),
        );
    }
    let labels: BTreeMap<String, String> = body["Labels"]
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                .collect()
        })
        .unwrap_or_default();
    let id = state.new_id();
    state.containers.insert(
        id.clone(),
        Container {
            id: id.clone(),
            name,
            labels,
            body,
            running: false,
            exit_code: 0,
            oom_killed: false,
            files: BTreeMap::new(),
            death: Arc::new(Notify::new()),
        },
    );
    (201, json!({"Id": id, "Warnings": []}))
}

//! `POST /exec/{id}/start` of the fake engine, and what runs "inside" its containers.
//!
//! The start request is hijacked as the reference describes
//! (https://docs.docker.com/reference/api/engine/version/v1.41/#tag/Exec/operation/ExecStart
//! and "Hijacking" under ContainerAttach): with `Upgrade: tcp` the engine answers
//! `101 UPGRADED`, `Content-Type: application/vnd.docker.raw-stream`, then the connection
//! carries the process's stdin from the client and, without a TTY, its output in the
//! multiplexed "Stream format": frames of an 8-byte header `[stream, 0, 0, 0, size as
//! big-endian u32]` (stream 1 stdout, 2 stderr) and `size` payload bytes.
//!
//! The fake runs no shell. It recognises the four `sh -c` programs hermesd sends (the
//! command wrapper, the kill, read and write programs) and emulates them over an in-memory
//! file map, and it interprets the wrapped command in a tiny language of its own:
//! `echo WORDS` (`$NAME` expands from the exec's Env), `err WORDS` (stderr), `exit N`,
//! `hang` (until killed or the container dies) and `oom` (the container dies, as the
//! kernel's OOM killer ends it: the stream drops, inspect says exited 137 OOMKilled).

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use super::{ExecRecord, Request, State, error, respond};

const STDOUT: u8 = 1;
const STDERR: u8 = 2;

async fn frame(stream: &mut UnixStream, kind: u8, data: &[u8]) -> std::io::Result<()> {
    for chunk in data.chunks(32 * 1024) {
        let size = u32::try_from(chunk.len())
            .expect("chunk size")
            .to_be_bytes();
        let header = [kind, 0, 0, 0, size[0], size[1], size[2], size[3]];
        stream.write_all(&header).await?;
        stream.write_all(chunk).await?;
    }
    Ok(())
}

fn finish(state: &Mutex<State>, exec_id: &str, code: Option<i64>) {
    if let Some(exec) = state.lock().expect("state").execs.get_mut(exec_id) {
        exec.running = false;
        exec.exit_code = code;
    }
}

pub(super) async fn start(
    mut stream: UnixStream,
    state: Arc<Mutex<State>>,
    exec_id: &str,
    request: &Request,
) -> std::io::Result<()> {
    // 404 for an unknown exec or a removed container, 409 when it is not running.
    let found: Result<ExecRecord, u16> = {
        let mut state = state.lock().expect("state");
        let record = state.execs.get(exec_id).cloned();
        match record {
            None => Err(404),
            Some(record) => match state.containers.get(&record.container) {
                None => Err(404),
                Some(c) if !c.running => Err(409),
                Some(_) => {
                    if let Some(e) = state.execs.get_mut(exec_id) {
                        e.running = true;
                    }
                    Ok(record)
                }
            },
        }
    };
    let exec = match found {
        Ok(exec) => exec,
        Err(status) => {
            let message = format!("exec {exec_id}: no such exec or container not running");
            return respond(&mut stream, status, &error(message)).await;
        }
    };
    let upgrade = request
        .headers
        .get("upgrade")
        .is_some_and(|v| v.eq_ignore_ascii_case("tcp"));
    assert!(upgrade, "hermesd starts execs attached through the hijack");
    stream
        .write_all(
            b"HTTP/1.1 101 UPGRADED\r\nContent-Type: application/vnd.docker.raw-stream\r\nConnection: Upgrade\r\nUpgrade: tcp\r\n\r\n",
        )
        .await?;
    let program = exec.cmd.get(2).cloned().unwrap_or_default();
    let args: Vec<String> = exec.cmd.iter().skip(4).cloned().collect();
    let code = if program.contains("hermesd-end") {
        wrapper(&mut stream, &state, &exec, &args).await?
    } else if program.contains("$f.kill") && program.contains("kill -STOP") {
        let token = args.first().cloned().unwrap_or_default();
        let hang = {
            let mut state = state.lock().expect("state");
            state.kills.push(token.clone());
            state.hang(&token)
        };
        hang.notify_one();
        Some(0)
    } else if program.contains("exec cat --") {
        read(&mut stream, &state, &exec, &args).await?
    } else if program.contains("cat >\"$1\"") {
        let mut data = Vec::new();
        stream.read_to_end(&mut data).await?;
        let path = resolve(&exec, args.first().map(String::as_str).unwrap_or(""));
        let mut state = state.lock().expect("state");
        match state.containers.get_mut(&exec.container) {
            Some(c) => {
                c.files.insert(path, data);
                Some(0)
            }
            None => None,
        }
    } else {
        frame(&mut stream, STDERR, b"fake engine: unknown program\n").await?;
        Some(127)
    };
    finish(&state, exec_id, code);
    stream.shutdown().await
}

fn resolve(exec: &ExecRecord, path: &str) -> String {
    if path.starts_with('/') {
        path.to_owned()
    } else {
        format!("{}/{path}", exec.working_dir.trim_end_matches('/'))
    }
}

async fn read(
    stream: &mut UnixStream,
    state: &Mutex<State>,
    exec: &ExecRecord,
    args: &[String],
) -> std::io::Result<Option<i64>> {
    let path = resolve(exec, args.first().map(String::as_str).unwrap_or(""));
    let found = {
        let state = state.lock().expect("state");
        state.containers.get(&exec.container).map(|c| {
            let dir = format!("{path}/");
            (
                c.files.get(&path).cloned(),
                c.files.keys().any(|k| k.starts_with(&dir)),
            )
        })
    };
    match found {
        None => Ok(None),
        Some((Some(data), _)) => {
            frame(stream, STDOUT, &data).await?;
            Ok(Some(0))
        }
        Some((None, true)) => Ok(Some(4)),
        Some((None, false)) => Ok(Some(3)),
    }
}

/// The command wrapper: `$1` script, `$2` token. Ends with the end mark and the status,
/// unless the command was killed or the container died.
async fn wrapper(
    stream: &mut UnixStream,
    state: &Mutex<State>,
    exec: &ExecRecord,
    args: &[String],
) -> std::io::Result<Option<i64>> {
    let script = args.first().cloned().unwrap_or_default();
    let token = args.get(1).cloned().unwrap_or_default();
    let (hang, death) = {
        let mut state = state.lock().expect("state");
        state.wrappers.push(token.clone());
        let death = state
            .containers
            .get(&exec.container)
            .map(|c| Arc::clone(&c.death));
        (state.hang(&token), death)
    };
    let env = |name: &str| {
        exec.env
            .iter()
            .find_map(|kv| kv.strip_prefix(&format!("{name}=")).map(str::to_owned))
            .unwrap_or_default()
    };
    let expand = |words: &str| {
        words
            .split(' ')
            .map(|w| match w.strip_prefix('$') {
                Some(name) => env(name),
                None => w.to_owned(),
            })
            .collect::<Vec<_>>()
            .join(" ")
    };
    let mut status = 0;
    for statement in script
        .split([';', '\n'])
        .map(str::trim)
        .filter(|s| !s.is_empty())
    {
        let (word, rest) = statement.split_once(' ').unwrap_or((statement, ""));
        match word {
            "echo" => frame(stream, STDOUT, format!("{}\n", expand(rest)).as_bytes()).await?,
            "err" => frame(stream, STDERR, format!("{}\n", expand(rest)).as_bytes()).await?,
            "exit" => {
                status = rest.trim().parse().unwrap_or(1);
                break;
            }
            "hang" => {
                let Some(death) = &death else { return Ok(None) };
                tokio::select! {
                    () = hang.notified() => return Ok(Some(143)),
                    () = death.notified() => return Ok(None),
                }
            }
            "oom" => {
                state
                    .lock()
                    .expect("state")
                    .kill_container(&exec.container, 137, true);
                return Ok(None);
            }
            other => {
                frame(
                    stream,
                    STDERR,
                    format!("sh: {other}: not found\n").as_bytes(),
                )
                .await?;
                status = 127;
            }
        }
    }
    let mark = format!("\u{1e}hermesd-end {token} {status}\u{1e}");
    frame(stream, STDOUT, mark.as_bytes()).await?;
    Ok(Some(status))
}

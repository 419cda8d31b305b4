//! A bubblewrap sandbox per scope (`terminal.backend: local` with `terminal.sandbox_scope`
//! `chat` or `user`): every command runs under `bwrap` in fresh namespaces (user, pid, ipc,
//! uts, cgroup and, unless `terminal.sandbox_network`, network), as an unprivileged uid, with
//! the system directories read-only, a private `/tmp`, and one writable directory of its own:
//! `<sandbox_dir>/<scope id>`, bound at the same path so the file tools, which act on the
//! host's files, see exactly what the commands see. Nothing else of the host is visible: not
//! `HERMES_HOME`, not other scopes' directories, not `/root` or `/home`. The configured
//! `terminal.cwd` (a project) is visible read-only.
//!
//! The sandbox holds no process between commands: its state is its directory, so an idle
//! sandbox costs no memory, and "stopping" one only forgets it.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use futures_util::future::BoxFuture;
use tokio_util::sync::CancellationToken;

use super::local::{read_host_file, write_host_file};
use super::{Backend, BackendError, BackendFactory, BackendFuture, Exec, RunResult, Scope};
use crate::process::shell_quote;
use crate::tools::local::{ShellCommand, find_bash, run_foreground};

/// The uid and gid commands run as inside the sandbox (mapped to the daemon's own).
const SANDBOX_ID: &str = "1000";

/// System directories bound read-only when they exist (symlinks are recreated as symlinks,
/// as merged-/usr systems have them).
const SYSTEM_DIRS: &[&str] = &[
    "/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32",
];

/// The parts of `/etc` programs need; never the whole directory (`/etc/shadow`, host keys).
const ETC_FILES: &[&str] = &[
    "/etc/alternatives",
    "/etc/ca-certificates",
    "/etc/ssl",
    "/etc/pki",
    "/etc/hosts",
    "/etc/resolv.conf",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/gai.conf",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/localtime",
    "/etc/timezone",
    "/etc/mime.types",
    "/etc/os-release",
    "/etc/bash.bashrc",
    "/etc/profile",
    "/etc/inputrc",
    "/etc/gitconfig",
    "/etc/python3",
    "/etc/npmrc",
];

/// Where bubblewrap is looked for when it is not on `PATH`.
const BWRAP_CANDIDATES: &[&str] = &["/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap"];

/// Finds `bwrap` on the daemon's `PATH` or in the usual places.
pub fn find_bwrap(env: &BTreeMap<String, String>) -> Option<PathBuf> {
    let from_path = env
        .get("PATH")
        .into_iter()
        .flat_map(|path| path.split(':'))
        .filter(|dir| !dir.is_empty())
        .map(|dir| Path::new(dir).join("bwrap"));
    from_path
        .chain(BWRAP_CANDIDATES.iter().map(PathBuf::from))
        .find(|candidate| candidate.is_file())
}

/// What every sandbox of one daemon shares.
#[derive(Debug, Clone)]
struct Settings {
    bwrap: PathBuf,
    bash: PathBuf,
    network: bool,
    /// The configured project directory, visible read-only.
    project: Option<PathBuf>,
}

/// One scope's sandbox.
#[derive(Debug)]
pub struct BwrapBackend {
    settings: Arc<Settings>,
    /// The scope's writable directory: its home and starting directory.
    dir: PathBuf,
}

impl BwrapBackend {
    /// The `bwrap` command line (quoted for `bash -c`) that runs `inner` in this sandbox,
    /// starting in `cwd` with `env` on top of a cleared environment.
    fn command_line(&self, inner: &str, cwd: &str, env: &BTreeMap<String, String>) -> String {
        let s = &self.settings;
        let mut args: Vec<String> = vec![s.bwrap.display().to_string()];
        let mut push = |items: &[&str]| args.extend(items.iter().map(|i| (*i).to_owned()));
        push(&["--unshare-all", "--unshare-user"]);
        if s.network {
            push(&["--share-net"]);
        }
        push(&[
            "--die-with-parent",
            "--new-session",
            "--disable-userns",
            "--uid",
            SANDBOX_ID,
            "--gid",
            SANDBOX_ID,
            "--hostname",
            "sandbox",
        ]);
        for dir in SYSTEM_DIRS {
            let path = Path::new(dir);
            match std::fs::read_link(path) {
                Ok(target) => {
                    let target = target.display().to_string();
                    args.extend(["--symlink".to_owned(), target, (*dir).to_owned()]);
                }
                Err(_) if path.is_dir() => {
                    args.extend(["--ro-bind".to_owned(), (*dir).to_owned(), (*dir).to_owned()]);
                }
                Err(_) => {}
            }
        }
        for file in ETC_FILES {
            args.extend([
                "--ro-bind-try".to_owned(),
                (*file).to_owned(),
                (*file).to_owned(),
            ]);
        }
        args.extend(
            ["--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp"]
                .iter()
                .map(|a| (*a).to_owned()),
        );
        if let Some(project) = &s.project {
            let project = project.display().to_string();
            args.extend(["--ro-bind-try".to_owned(), project.clone(), project]);
        }
        let dir = self.dir.display().to_string();
        args.extend(["--bind".to_owned(), dir.clone(), dir.clone()]);
        args.extend([
            "--chdir".to_owned(),
            cwd.to_owned(),
            "--clearenv".to_owned(),
        ]);
        let mut env = env.clone();
        env.remove("HERMES_HOME");
        env.insert("HOME".to_owned(), dir);
        env.insert("TMPDIR".to_owned(), "/tmp".to_owned());
        env.insert("USER".to_owned(), "sandbox".to_owned());
        for (key, value) in &env {
            args.extend(["--setenv".to_owned(), key.clone(), value.clone()]);
        }
        args.extend([
            s.bash.display().to_string(),
            "-c".to_owned(),
            inner.to_owned(),
        ]);
        let quoted: Vec<String> = args.iter().map(|a| shell_quote(a)).collect();
        format!("exec {}", quoted.join(" "))
    }

    /// A directory inside the sandbox to start in: `cwd` when it is this sandbox's or the
    /// project's, else the sandbox's own directory.
    fn start_dir(&self, cwd: &str) -> String {
        let path = Path::new(cwd);
        let inside = path.starts_with(&self.dir)
            || self
                .settings
                .project
                .as_ref()
                .is_some_and(|p| path.starts_with(p));
        if inside && path.is_dir() {
            cwd.to_owned()
        } else {
            self.dir.display().to_string()
        }
    }

    fn resolve(&self, path: &str) -> PathBuf {
        self.dir.join(path)
    }
}

impl Backend for BwrapBackend {
    fn kind(&self) -> &'static str {
        "sandbox"
    }

    fn default_cwd(&self) -> String {
        self.dir.display().to_string()
    }

    fn host_roots(&self) -> Option<Vec<PathBuf>> {
        Some(vec![self.dir.clone()])
    }

    fn host_command(
        &self,
        script: &str,
        cwd: &str,
        env: &BTreeMap<String, String>,
    ) -> Option<String> {
        Some(self.command_line(script, &self.start_dir(cwd), env))
    }

    fn run<'a>(
        &'a self,
        exec: &'a Exec,
        cancel: &'a CancellationToken,
    ) -> BackendFuture<'a, RunResult> {
        Box::pin(async move {
            if !self.dir.is_dir() {
                return Err(BackendError::Gone {
                    kind: "sandbox",
                    detail: format!("its directory {} was removed", self.dir.display()),
                });
            }
            let start = self.start_dir(&exec.cwd);
            let shell = ShellCommand {
                script: self.command_line(&exec.script, &start, &exec.env),
                cwd: PathBuf::from(&start),
                env: BTreeMap::from([(
                    "PATH".to_owned(),
                    "/usr/local/bin:/usr/bin:/bin".to_owned(),
                )]),
                stdin: false,
            };
            Ok(run_foreground(&shell, exec.timeout, cancel, exec.max_chars).await?)
        })
    }

    fn read_file<'a>(&'a self, path: &'a str) -> BackendFuture<'a, Option<Vec<u8>>> {
        Box::pin(read_host_file(self.resolve(path)))
    }

    fn write_file<'a>(&'a self, path: &'a str, data: &'a [u8]) -> BackendFuture<'a, ()> {
        Box::pin(write_host_file(self.resolve(path), data))
    }

    fn shutdown(&self) -> BoxFuture<'_, ()> {
        // No process outlives a command; the directory is the scope's state and stays.
        Box::pin(async {})
    }
}

/// Opens the sandbox of each scope under one base directory.
#[derive(Debug)]
pub struct BwrapFactory {
    settings: Arc<Settings>,
    base: PathBuf,
}

impl BwrapFactory {
    /// Sandboxes under `base` (created 0700); `env` is the daemon's (to find bwrap and bash).
    pub fn new(
        base: PathBuf,
        network: bool,
        project: Option<PathBuf>,
        env: &BTreeMap<String, String>,
    ) -> Result<Self, String> {
        let bwrap = find_bwrap(env).ok_or_else(|| {
            "terminal.sandbox_scope needs bubblewrap (`bwrap`), which is not installed: install the `bubblewrap` package, or use terminal.backend: docker".to_owned()
        })?;
        Ok(Self {
            settings: Arc::new(Settings {
                bwrap,
                bash: find_bash(env),
                network,
                project,
            }),
            base,
        })
    }

    fn make_dir(dir: &Path) -> std::io::Result<()> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
    }
}

impl BackendFactory for BwrapFactory {
    fn kind(&self) -> &'static str {
        "sandbox"
    }

    fn open<'a>(&'a self, scope: &'a Scope) -> BackendFuture<'a, Arc<dyn Backend>> {
        Box::pin(async move {
            let dir = self.base.join(scope.id());
            Self::make_dir(&dir).map_err(|e| BackendError::Unavailable {
                kind: "sandbox",
                detail: format!("cannot create {}: {e}", dir.display()),
            })?;
            let dir = std::fs::canonicalize(&dir)?;
            let backend: Arc<dyn Backend> = Arc::new(BwrapBackend {
                settings: Arc::clone(&self.settings),
                dir,
            });
            Ok(backend)
        })
    }

    fn probe(&self) -> BackendFuture<'_, String> {
        Box::pin(async move {
            // A throwaway directory outside the home: `doctor` never writes there.
            let probe_dir = std::env::temp_dir().join(format!(
                "hermesd-sandbox-probe-{}-{:08x}",
                std::process::id(),
                rand::random::<u32>()
            ));
            Self::make_dir(&probe_dir).map_err(|e| BackendError::Unavailable {
                kind: "sandbox",
                detail: format!("cannot create {}: {e}", probe_dir.display()),
            })?;
            let backend = BwrapBackend {
                settings: Arc::clone(&self.settings),
                dir: std::fs::canonicalize(&probe_dir)?,
            };
            let exec = Exec {
                script: "id -u".to_owned(),
                cwd: backend.default_cwd(),
                env: BTreeMap::new(),
                timeout: std::time::Duration::from_secs(20),
                max_chars: 4000,
            };
            let run = backend.run(&exec, &CancellationToken::new()).await?;
            let _ = std::fs::remove_dir_all(&probe_dir);
            if run.exit_code != 0 || run.output.trim() != SANDBOX_ID {
                return Err(BackendError::Unavailable {
                    kind: "sandbox",
                    detail: format!(
                        "{} could not start a sandbox (exit {}): {} — unprivileged user namespaces may be disabled (sysctl kernel.unprivileged_userns_clone, or AppArmor's restriction on Ubuntu)",
                        self.settings.bwrap.display(),
                        run.exit_code,
                        run.output.trim()
                    ),
                });
            }
            Ok(format!(
                "bubblewrap sandboxes under {} ({}network)",
                self.base.display(),
                if self.settings.network { "" } else { "no " }
            ))
        })
    }
}

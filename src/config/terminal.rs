//! `terminal:` as Hermes reads it: the backend (`local`, `docker`, `ssh`), the working
//! directory, the default timeout, variables passed through, and each backend's keys, with the
//! `TERMINAL_*` environment spellings. As in Hermes's gateway, a key written in config.yaml
//! wins over its variable. hermesd adds `sandbox_scope` (a sandbox per chat or per person)
//! and `sandbox_network`. Keys for backends hermesd lacks are reported, never dropped quietly.

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::Serialize;
use serde_json::Value;

use super::choice::Choice;
use super::env_overrides::env_leaf;
use super::parse::{Issues, Leaf, at, kind};

/// `terminal.backend` / `TERMINAL_ENV`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TerminalBackend {
    #[default]
    Local,
    Docker,
    Ssh,
}

impl Choice for TerminalBackend {
    const NAMES: &'static [&'static str] = &["local", "docker", "ssh"];
    fn from_name(name: &str) -> Option<Self> {
        match name {
            "local" => Some(Self::Local),
            "docker" => Some(Self::Docker),
            "ssh" => Some(Self::Ssh),
            _ => None,
        }
    }
}

impl TerminalBackend {
    pub fn name(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Docker => "docker",
            Self::Ssh => "ssh",
        }
    }
}

/// `terminal.sandbox_scope` (hermesd's own): who shares a sandbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxScope {
    /// One backend for every turn, as Hermes has it. On `local` this is the host itself.
    #[default]
    Shared,
    /// One per chat (the session key's platform and chat).
    Chat,
    /// One per person (platform and user id); chats without a user id fall back to `chat`.
    User,
}

impl Choice for SandboxScope {
    const NAMES: &'static [&'static str] = &["shared", "chat", "user"];
    fn from_name(name: &str) -> Option<Self> {
        match name {
            "shared" => Some(Self::Shared),
            "chat" | "session" => Some(Self::Chat),
            "user" => Some(Self::User),
            _ => None,
        }
    }
}

/// The Docker keys (`terminal.docker_*`, `terminal.container_*`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DockerSettings {
    /// `docker_image` (Hermes's default image).
    pub image: String,
    /// `docker_volumes`: `host:container[:ro]` binds.
    pub volumes: Vec<String>,
    /// `docker_network`: false runs containers with no network at all.
    pub network: bool,
    /// `docker_env`: variables set in the container.
    pub env: BTreeMap<String, String>,
    /// `docker_forward_env`: names whose values are copied from the daemon's environment.
    pub forward_env: Vec<String>,
    /// `container_cpu`: CPUs (fractions allowed).
    pub cpu: f64,
    /// `container_memory`: MiB.
    pub memory_mb: u64,
    /// `container_disk`: MiB (applied where the engine's storage driver supports a size).
    pub disk_mb: u64,
    /// `container_persistent`: `/root` and `/workspace` are host directories under
    /// `sandbox_dir/docker/<scope>`, so their files outlive the container (idle stops,
    /// restarts); false: both are tmpfs, gone with the container.
    pub persistent: bool,
    /// `docker_mount_cwd_to_workspace`: bind the configured host `cwd` at `/workspace`.
    pub mount_cwd_to_workspace: bool,
    /// `docker_run_as_host_user`: run commands as the daemon's uid:gid.
    pub run_as_host_user: bool,
    /// The engine's address: `DOCKER_HOST` (`unix://...` or `tcp://...`), else the default
    /// socket.
    pub host: Option<String>,
}

impl Default for DockerSettings {
    fn default() -> Self {
        Self {
            image: "nikolaik/python-nodejs:python3.11-nodejs20".to_owned(),
            volumes: Vec::new(),
            // Off unless configured: a container reaches nothing by default.
            network: false,
            env: BTreeMap::new(),
            forward_env: Vec::new(),
            cpu: 1.0,
            memory_mb: 5120,
            disk_mb: 51200,
            persistent: true,
            mount_cwd_to_workspace: false,
            run_as_host_user: false,
            host: None,
        }
    }
}

/// The SSH keys (`terminal.ssh_*`, `TERMINAL_SSH_*`).
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct SshSettings {
    pub host: Option<String>,
    pub user: Option<String>,
    pub port: u16,
    /// `ssh_key`: a private key file (`~` expanded).
    pub key: Option<PathBuf>,
    /// hermesd's `ssh_known_hosts`: the known-hosts file checked (default `~/.ssh/known_hosts`).
    pub known_hosts: Option<PathBuf>,
    /// hermesd's `ssh_host_key_checking`: false accepts any host key (logged as a warning).
    pub host_key_checking: bool,
}

/// The whole `terminal:` section.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TerminalConfig {
    pub backend: TerminalBackend,
    /// `cwd` as written (placeholders `.`, `auto`, `cwd` and empty mean unset; `~` expanded
    /// for local and docker, kept for ssh where the remote shell expands it).
    pub cwd: Option<String>,
    /// `timeout`: the default foreground timeout in seconds.
    pub timeout_secs: u64,
    /// `env_passthrough`: variables a command sees even though their names look secret
    /// (never the provider keys hermesd itself uses).
    pub env_passthrough: Vec<String>,
    /// `persistent_shell`: keep one connection (ssh) or container (docker) and the working
    /// directory between commands. Exported variables do not carry over (reported).
    pub persistent_shell: bool,
    /// `lifetime_seconds`: an idle sandbox is stopped after this long.
    pub lifetime_seconds: u64,
    /// `sandbox_dir`: where per-scope sandboxes keep their files (default
    /// `$HERMES_HOME/sandboxes`).
    pub sandbox_dir: Option<PathBuf>,
    pub sandbox_scope: SandboxScope,
    /// hermesd's `sandbox_network`: whether a local (bubblewrap) sandbox may use the network.
    pub sandbox_network: bool,
    pub docker: DockerSettings,
    pub ssh: SshSettings,
}

impl Default for TerminalConfig {
    fn default() -> Self {
        Self {
            backend: TerminalBackend::Local,
            cwd: None,
            timeout_secs: 180,
            env_passthrough: Vec::new(),
            persistent_shell: true,
            lifetime_seconds: 300,
            sandbox_dir: None,
            sandbox_scope: SandboxScope::Shared,
            sandbox_network: false,
            docker: DockerSettings::default(),
            ssh: SshSettings {
                port: 22,
                host_key_checking: true,
                ..SshSettings::default()
            },
        }
    }
}

/// Values that mean "no working directory given" (Hermes's gateway placeholders).
const CWD_PLACEHOLDERS: &[&str] = &[".", "auto", "cwd"];

/// Keys of Hermes's `terminal:` section for backends or features hermesd lacks.
const NOT_SUPPORTED: &[(&str, &str)] = &[
    ("daytona_image", "the daytona backend"),
    (
        "docker_extra_args",
        "extra docker CLI arguments (hermesd talks to the Engine API)",
    ),
    (
        "docker_orphan_reaper",
        "hermesd always removes its own stopped containers at start",
    ),
    (
        "docker_persist_across_processes",
        "containers are per daemon run",
    ),
    ("home_mode", "home_mode"),
    ("modal_image", "the modal backend"),
    ("modal_mode", "the modal backend"),
    ("singularity_image", "the singularity backend"),
];

/// The names of [`NOT_SUPPORTED`], for `config/KEYS.md`.
#[cfg(test)]
pub(super) const IGNORED_TERMINAL: &[&str] = &[
    "daytona_image",
    "docker_extra_args",
    "docker_orphan_reaper",
    "docker_persist_across_processes",
    "home_mode",
    "modal_image",
    "modal_mode",
    "singularity_image",
];

/// Keys read below, with their environment spellings.
const ENV_NAMES: &[(&str, &str)] = &[
    ("backend", "TERMINAL_ENV"),
    ("cwd", "TERMINAL_CWD"),
    ("timeout", "TERMINAL_TIMEOUT"),
    ("lifetime_seconds", "TERMINAL_LIFETIME_SECONDS"),
    ("persistent_shell", "TERMINAL_PERSISTENT_SHELL"),
    ("sandbox_dir", "TERMINAL_SANDBOX_DIR"),
    ("docker_image", "TERMINAL_DOCKER_IMAGE"),
    ("docker_volumes", "TERMINAL_DOCKER_VOLUMES"),
    ("docker_network", "TERMINAL_DOCKER_NETWORK"),
    ("docker_env", "TERMINAL_DOCKER_ENV"),
    ("docker_forward_env", "TERMINAL_DOCKER_FORWARD_ENV"),
    (
        "docker_mount_cwd_to_workspace",
        "TERMINAL_DOCKER_MOUNT_CWD_TO_WORKSPACE",
    ),
    (
        "docker_run_as_host_user",
        "TERMINAL_DOCKER_RUN_AS_HOST_USER",
    ),
    ("container_cpu", "TERMINAL_CONTAINER_CPU"),
    ("container_memory", "TERMINAL_CONTAINER_MEMORY"),
    ("container_disk", "TERMINAL_CONTAINER_DISK"),
    ("container_persistent", "TERMINAL_CONTAINER_PERSISTENT"),
    ("ssh_host", "TERMINAL_SSH_HOST"),
    ("ssh_user", "TERMINAL_SSH_USER"),
    ("ssh_port", "TERMINAL_SSH_PORT"),
    ("ssh_key", "TERMINAL_SSH_KEY"),
];

/// hermesd's own keys (no environment spelling).
const OWN_KEYS: &[&str] = &[
    "env_passthrough",
    "sandbox_network",
    "sandbox_scope",
    "ssh_host_key_checking",
    "ssh_known_hosts",
];

/// Reads one key: the config file's value, else its `TERMINAL_*` variable.
struct Reader<'a> {
    section: &'a serde_json::Map<String, Value>,
    env: &'a BTreeMap<String, String>,
}

impl Reader<'_> {
    fn leaf(&self, key: &str) -> Option<Leaf> {
        at(format!("terminal.{key}"), self.section.get(key)).or_else(|| {
            ENV_NAMES
                .iter()
                .find(|(name, _)| *name == key)
                .and_then(|(_, var)| env_leaf(self.env, var))
        })
    }

    /// A list or a mapping written in YAML, or as JSON in its variable (as Hermes bridges
    /// them).
    fn json(&self, issues: &mut Issues, key: &str) -> Option<Leaf> {
        let leaf = self.leaf(key)?;
        match &leaf.value {
            Value::String(text) if leaf.key.starts_with("TERMINAL_") => {
                match serde_json::from_str::<Value>(text) {
                    Ok(value) => Some(Leaf {
                        key: leaf.key,
                        value,
                    }),
                    Err(_) => {
                        issues.error(&leaf.key, "expected valid JSON");
                        None
                    }
                }
            }
            _ => Some(leaf),
        }
    }
}

fn expand_tilde(path: &str, env: &BTreeMap<String, String>) -> String {
    match (path.strip_prefix('~'), env.get("HOME")) {
        (Some(""), Some(home)) => home.clone(),
        (Some(rest), Some(home)) if rest.starts_with('/') => format!("{home}{rest}"),
        _ => path.to_owned(),
    }
}

fn string_map(issues: &mut Issues, leaf: Option<Leaf>) -> BTreeMap<String, String> {
    let Some(leaf) = leaf else {
        return BTreeMap::new();
    };
    let Value::Object(map) = &leaf.value else {
        issues.error(
            &leaf.key,
            format!("expected a mapping, got {}", kind(&leaf.value)),
        );
        return BTreeMap::new();
    };
    map.iter()
        .filter_map(|(name, value)| match value {
            Value::String(text) => Some((name.clone(), text.clone())),
            Value::Number(_) | Value::Bool(_) => Some((name.clone(), value.to_string())),
            other => {
                issues.error(
                    format!("{}.{name}", leaf.key),
                    format!("expected text, got {}", kind(other)),
                );
                None
            }
        })
        .collect()
}

pub fn terminal(
    issues: &mut Issues,
    section: Option<&Value>,
    env: &BTreeMap<String, String>,
) -> TerminalConfig {
    let defaults = TerminalConfig::default();
    let empty = serde_json::Map::new();
    let section = match section {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(map)) => map,
        Some(other) => {
            issues.error(
                "terminal",
                format!("expected a mapping, got {}", kind(other)),
            );
            &empty
        }
    };
    for key in section.keys() {
        if let Some((_, what)) = NOT_SUPPORTED.iter().find(|(name, _)| name == key) {
            issues.warn(format!(
                "terminal.{key} is not supported by hermesd yet ({what}); it has no effect"
            ));
        } else if !ENV_NAMES.iter().any(|(name, _)| name == key)
            && !OWN_KEYS.contains(&key.as_str())
        {
            issues.warn(format!("unknown key 'terminal.{key}'"));
        }
    }
    let read = Reader { section, env };
    let backend_leaf = read.leaf("backend");
    if let Some(Leaf {
        value: Value::String(name),
        key,
    }) = &backend_leaf
    {
        let name = name.trim().to_ascii_lowercase();
        if ["singularity", "modal", "daytona"].contains(&name.as_str()) {
            issues.error(
                key,
                format!(
                    "the {name} backend is not supported by hermesd; use docker (any Docker-compatible engine, podman included) or ssh"
                ),
            );
        }
    }
    let backend = issues.choice(backend_leaf, defaults.backend);
    let cwd = issues
        .string(read.leaf("cwd"))
        .filter(|cwd| !CWD_PLACEHOLDERS.contains(&cwd.as_str()))
        .map(|cwd| {
            if backend == TerminalBackend::Ssh {
                cwd
            } else {
                expand_tilde(&cwd, env)
            }
        });
    let docker_defaults = DockerSettings::default();
    let volumes = read.json(issues, "docker_volumes");
    let docker_env = read.json(issues, "docker_env");
    let forward_env = read.json(issues, "docker_forward_env");
    let docker = DockerSettings {
        image: issues
            .string(read.leaf("docker_image"))
            .unwrap_or(docker_defaults.image),
        volumes: issues.list(volumes, false).unwrap_or_default(),
        network: issues.bool(read.leaf("docker_network"), docker_defaults.network),
        env: string_map(issues, docker_env),
        forward_env: issues.list(forward_env, true).unwrap_or_default(),
        cpu: issues.float(
            read.leaf("container_cpu"),
            docker_defaults.cpu,
            |n| n > 0.0,
            "more than 0",
        ),
        memory_mb: issues.uint(
            read.leaf("container_memory"),
            docker_defaults.memory_mb,
            6,
            u64::from(u32::MAX),
        ),
        disk_mb: issues.uint(
            read.leaf("container_disk"),
            docker_defaults.disk_mb,
            1,
            u64::from(u32::MAX),
        ),
        persistent: issues.bool(
            read.leaf("container_persistent"),
            docker_defaults.persistent,
        ),
        mount_cwd_to_workspace: issues.bool(read.leaf("docker_mount_cwd_to_workspace"), false),
        run_as_host_user: issues.bool(read.leaf("docker_run_as_host_user"), false),
        host: env
            .get("DOCKER_HOST")
            .filter(|h| !h.trim().is_empty())
            .cloned(),
    };
    let port = issues.uint(read.leaf("ssh_port"), 22, 1, 65535);
    let ssh = SshSettings {
        host: issues.string(read.leaf("ssh_host")),
        user: issues.string(read.leaf("ssh_user")),
        port: u16::try_from(port).unwrap_or(22),
        key: issues
            .string(read.leaf("ssh_key"))
            .map(|key| PathBuf::from(expand_tilde(&key, env))),
        known_hosts: issues
            .string(read.leaf("ssh_known_hosts"))
            .map(|path| PathBuf::from(expand_tilde(&path, env))),
        host_key_checking: issues.bool(read.leaf("ssh_host_key_checking"), true),
    };
    if backend == TerminalBackend::Ssh && ssh.host.is_none() {
        issues.error(
            "terminal.ssh_host",
            "the ssh backend needs a host (terminal.ssh_host or TERMINAL_SSH_HOST)",
        );
    }
    if !ssh.host_key_checking {
        issues.warn(
            "terminal.ssh_host_key_checking is false: any host key is accepted, so a machine in the middle can read every command",
        );
    }
    TerminalConfig {
        backend,
        cwd,
        timeout_secs: issues.uint(read.leaf("timeout"), defaults.timeout_secs, 1, 86_400),
        env_passthrough: issues
            .list(read.leaf("env_passthrough"), true)
            .unwrap_or_default(),
        persistent_shell: issues.bool(read.leaf("persistent_shell"), defaults.persistent_shell),
        lifetime_seconds: issues.uint(
            read.leaf("lifetime_seconds"),
            defaults.lifetime_seconds,
            10,
            u64::from(u32::MAX),
        ),
        sandbox_dir: issues
            .string(read.leaf("sandbox_dir"))
            .map(|dir| PathBuf::from(expand_tilde(&dir, env))),
        sandbox_scope: issues.choice(read.leaf("sandbox_scope"), defaults.sandbox_scope),
        sandbox_network: issues.bool(read.leaf("sandbox_network"), false),
        docker,
        ssh,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_ignored_list_names_every_unsupported_key() {
        let names: Vec<&str> = super::NOT_SUPPORTED.iter().map(|(k, _)| *k).collect();
        assert_eq!(names, super::IGNORED_TERMINAL);
    }
}

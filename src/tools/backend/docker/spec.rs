//! What a scope's container is made of, worked out once from `terminal.*` when the daemon
//! starts: the image, limits, mounts, variables, labels and the hardening every container
//! gets. Bad settings (a malformed volume, a cwd mount without a host directory) are refused
//! here with a message naming the key, before any container exists.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use bollard::models::{ContainerCreateBody, HostConfig};
use sha2::{Digest, Sha256};

use crate::config::{DockerSettings, TerminalConfig};

/// PID 1 of every container: waits forever without a `sleep infinity` (busybox's sleep has
/// none) and leaves at once on the engine's stop signal.
pub(super) const KEEP_ALIVE: &str = "trap 'exit 0' TERM; while :; do sleep 3600 & wait $!; done";

/// Processes one container may hold (a fork bomb stops here).
const PIDS_LIMIT: i64 = 256;

/// Mount options Docker accepts after `host:container:` in a bind.
const BIND_OPTIONS: &[&str] = &[
    "ro",
    "rw",
    "z",
    "Z",
    "shared",
    "slave",
    "private",
    "rshared",
    "rslave",
    "rprivate",
    "nocopy",
    "consistent",
    "cached",
    "delegated",
];

/// Where `/workspace` comes from.
#[derive(Debug, Clone, PartialEq)]
enum Workspace {
    /// `docker_mount_cwd_to_workspace`: the host's `terminal.cwd`.
    HostCwd(PathBuf),
    /// A `docker_volumes` entry already targets `/workspace`.
    FromVolumes,
    /// The scope's own directory (persistent) or a tmpfs.
    Own,
}

#[derive(Debug, Clone)]
pub(super) struct ContainerSpec {
    image: String,
    network: bool,
    env: BTreeMap<String, String>,
    forward_env: Vec<String>,
    binds: Vec<String>,
    workspace: Workspace,
    /// `<sandbox_dir>/docker` when `container_persistent` keeps files on the host.
    persistent_root: Option<PathBuf>,
    nano_cpus: Option<i64>,
    memory: Option<i64>,
    disk_mb: u64,
    /// `uid:gid` of the daemon (`docker_run_as_host_user`).
    user: Option<String>,
    /// 16 hex digits of SHA-256 over the HERMES_HOME path: labels this home's containers.
    home_hash: String,
}

impl ContainerSpec {
    pub(super) fn new(
        settings: &DockerSettings,
        terminal: &TerminalConfig,
        home: &Path,
    ) -> Result<Self, String> {
        if settings.image.trim().is_empty() {
            return Err("terminal.docker_image is empty: name the image to run".to_owned());
        }
        for name in settings.env.keys().chain(&settings.forward_env) {
            if name.is_empty() || name.contains('=') || name.contains('\0') {
                return Err(format!(
                    "terminal.docker_env / docker_forward_env: '{name}' is not a variable name"
                ));
            }
        }
        let mut binds = Vec::new();
        let mut workspace = Workspace::Own;
        for volume in &settings.volumes {
            let bind = parse_volume(volume)?;
            if bind.target == "/workspace" {
                workspace = Workspace::FromVolumes;
            }
            if bind.source.ends_with("docker.sock") {
                tracing::warn!(
                    volume = %volume,
                    "terminal.docker_volumes mounts an engine socket: commands in the sandbox can control the engine and the host"
                );
            }
            binds.push(volume.trim().to_owned());
        }
        if settings.mount_cwd_to_workspace && workspace == Workspace::Own {
            let cwd = terminal.cwd.as_deref().map(PathBuf::from);
            match cwd {
                Some(dir) if dir.is_absolute() && dir.is_dir() => {
                    workspace = Workspace::HostCwd(dir);
                }
                Some(dir) => {
                    return Err(format!(
                        "terminal.docker_mount_cwd_to_workspace: terminal.cwd {} is not an existing absolute directory on this host",
                        dir.display()
                    ));
                }
                None => {
                    return Err(
                        "terminal.docker_mount_cwd_to_workspace needs terminal.cwd set to a directory on this host"
                            .to_owned(),
                    );
                }
            }
        }
        let persistent_root = settings.persistent.then(|| {
            terminal
                .sandbox_dir
                .clone()
                .unwrap_or_else(|| home.join("sandboxes"))
                .join("docker")
        });
        let user = settings.run_as_host_user.then(|| {
            format!(
                "{}:{}",
                rustix::process::getuid().as_raw(),
                rustix::process::getgid().as_raw()
            )
        });
        Ok(Self {
            image: settings.image.trim().to_owned(),
            network: settings.network,
            env: settings.env.clone(),
            forward_env: settings.forward_env.clone(),
            binds,
            workspace,
            persistent_root,
            // Whole nanoseconds of CPU per second; 1e9 per CPU (HostConfig.NanoCpus).
            nano_cpus: (settings.cpu > 0.0).then(|| (settings.cpu * 1e9).round() as i64),
            memory: (settings.memory_mb > 0)
                .then(|| i64::try_from(settings.memory_mb * 1024 * 1024).unwrap_or(i64::MAX)),
            disk_mb: settings.disk_mb,
            user,
            home_hash: home_hash(home),
        })
    }

    pub(super) fn image(&self) -> &str {
        &self.image
    }

    pub(super) fn wants_disk_limit(&self) -> bool {
        self.disk_mb > 0
    }

    /// Where commands start: the mounted host cwd, else root's home as in Hermes.
    pub(super) fn default_cwd(&self) -> &'static str {
        match self.workspace {
            Workspace::HostCwd(_) => "/workspace",
            _ => "/root",
        }
    }

    /// `hermesd-<8 hex of the home>-<scope id>`: unique per home and scope, no user ids.
    pub(super) fn container_name(&self, scope_id: &str) -> String {
        format!("hermesd-{}-{scope_id}", &self.home_hash[..8])
    }

    /// The label filter that finds this home's containers (for the sweep).
    pub(super) fn home_filter(&self) -> Vec<String> {
        vec![
            "hermesd=1".to_owned(),
            format!("hermesd.home={}", self.home_hash),
        ]
    }

    /// The scope's host directories for `/root` and `/workspace` when files persist.
    pub(super) fn scope_dirs(&self, scope_id: &str) -> Vec<PathBuf> {
        let Some(root) = &self.persistent_root else {
            return Vec::new();
        };
        let scope = root.join(scope_id);
        let mut dirs = vec![scope.join("home")];
        if self.workspace == Workspace::Own {
            dirs.push(scope.join("workspace"));
        }
        dirs
    }

    /// The create request for one scope's container. `lookup` reads the daemon's
    /// environment for `docker_forward_env`; `disk_limit` is false once the engine said its
    /// storage driver has no size option.
    pub(super) fn create_body(
        &self,
        scope_id: &str,
        lookup: &dyn Fn(&str) -> Option<String>,
        disk_limit: bool,
    ) -> ContainerCreateBody {
        let mut env: BTreeMap<String, String> = self
            .forward_env
            .iter()
            .filter_map(|name| lookup(name).map(|value| (name.clone(), value)))
            .collect();
        // An explicit docker_env value wins over a forwarded one of the same name.
        env.extend(self.env.clone());
        let mut binds = Vec::new();
        let mut tmpfs: HashMap<String, String> = [
            ("/tmp", "rw,nosuid,size=512m"),
            ("/var/tmp", "rw,noexec,nosuid,size=256m"),
            ("/run", "rw,noexec,nosuid,size=64m"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        if let Workspace::HostCwd(dir) = &self.workspace {
            binds.push(format!("{}:/workspace", dir.display()));
        }
        match &self.persistent_root {
            Some(root) => {
                let scope = root.join(scope_id);
                binds.push(format!("{}:/root", scope.join("home").display()));
                if self.workspace == Workspace::Own {
                    binds.push(format!("{}:/workspace", scope.join("workspace").display()));
                }
            }
            None => {
                tmpfs.insert("/root".to_owned(), "rw,exec,size=1g".to_owned());
                tmpfs.insert("/home".to_owned(), "rw,exec,size=1g".to_owned());
                if self.workspace == Workspace::Own {
                    tmpfs.insert("/workspace".to_owned(), "rw,exec,size=10g".to_owned());
                }
            }
        }
        binds.extend(self.binds.iter().cloned());
        let mut cap_add = vec!["DAC_OVERRIDE", "CHOWN", "FOWNER"];
        if self.user.is_none() {
            cap_add.extend(["SETUID", "SETGID"]);
        }
        let labels: HashMap<String, String> = [
            ("hermesd", "1".to_owned()),
            ("hermesd.scope", scope_id.to_owned()),
            ("hermesd.home", self.home_hash.clone()),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        let host_config = HostConfig {
            nano_cpus: self.nano_cpus,
            memory: self.memory,
            pids_limit: Some(PIDS_LIMIT),
            cap_drop: Some(vec!["ALL".to_owned()]),
            cap_add: Some(cap_add.into_iter().map(str::to_owned).collect()),
            security_opt: Some(vec!["no-new-privileges".to_owned()]),
            network_mode: (!self.network).then(|| "none".to_owned()),
            tmpfs: Some(tmpfs),
            binds: Some(binds),
            storage_opt: (disk_limit && self.disk_mb > 0)
                .then(|| HashMap::from([("size".to_owned(), format!("{}M", self.disk_mb))])),
            ..HostConfig::default()
        };
        ContainerCreateBody {
            image: Some(self.image.clone()),
            cmd: Some(vec![
                "sh".to_owned(),
                "-c".to_owned(),
                KEEP_ALIVE.to_owned(),
            ]),
            env: Some(env.into_iter().map(|(k, v)| format!("{k}={v}")).collect()),
            labels: Some(labels),
            user: self.user.clone(),
            working_dir: Some(self.default_cwd().to_owned()),
            host_config: Some(host_config),
            ..ContainerCreateBody::default()
        }
    }
}

/// 16 hex digits of SHA-256 over the home's path.
pub(super) fn home_hash(home: &Path) -> String {
    let digest = Sha256::digest(home.as_os_str().as_encoded_bytes());
    hex::encode(&digest[..8])
}

struct Bind<'a> {
    source: &'a str,
    target: &'a str,
}

/// Checks one `docker_volumes` entry: `host:container[:options]`, the host side an
/// absolute path or a named volume, the container side absolute.
fn parse_volume(volume: &str) -> Result<Bind<'_>, String> {
    let bad = |why: &str| {
        Err(format!(
            "terminal.docker_volumes entry '{volume}' {why} (expected host:container[:ro])"
        ))
    };
    let parts: Vec<&str> = volume.trim().split(':').collect();
    let (source, target, options) = match parts.as_slice() {
        [source, target] => (*source, *target, None),
        [source, target, options] => (*source, *target, Some(*options)),
        _ => return bad("is not two or three parts separated by ':'"),
    };
    if source.is_empty() {
        return bad("has no host side");
    }
    let named_volume = source
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_alphanumeric())
        && source
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
    if !source.starts_with('/') && !named_volume {
        return bad("has a host side that is neither an absolute path nor a volume name");
    }
    if !target.starts_with('/') {
        return bad("has a container side that is not an absolute path");
    }
    if let Some(options) = options
        && let Some(unknown) = options.split(',').find(|o| !BIND_OPTIONS.contains(o))
    {
        return bad(&format!("has an unknown mount option '{unknown}'"));
    }
    Ok(Bind { source, target })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(settings: DockerSettings, terminal: &TerminalConfig) -> Result<ContainerSpec, String> {
        ContainerSpec::new(&settings, terminal, Path::new("/srv/hermes"))
    }

    #[test]
    fn malformed_volumes_are_refused_with_the_key() {
        let terminal = TerminalConfig::default();
        for volume in [
            "/data",
            "relative/dir:/data",
            "/data:data",
            "/a:/b:rw:extra",
            "/a:/b:sometimes",
            ":/b",
        ] {
            let err = spec(
                DockerSettings {
                    volumes: vec![volume.to_owned()],
                    ..DockerSettings::default()
                },
                &terminal,
            )
            .expect_err(volume);
            assert!(err.contains("terminal.docker_volumes"), "{err}");
            assert!(err.contains(volume), "{err}");
        }
        for volume in ["/srv/data:/data:ro", "cache:/cache", "/x:/y:ro,z"] {
            spec(
                DockerSettings {
                    volumes: vec![volume.to_owned()],
                    ..DockerSettings::default()
                },
                &terminal,
            )
            .expect(volume);
        }
    }

    #[test]
    fn cwd_mount_needs_a_host_directory() {
        let settings = DockerSettings {
            mount_cwd_to_workspace: true,
            ..DockerSettings::default()
        };
        let err = spec(settings.clone(), &TerminalConfig::default()).expect_err("no cwd");
        assert!(err.contains("terminal.cwd"), "{err}");
        let missing = TerminalConfig {
            cwd: Some("/no/such/dir/here".to_owned()),
            ..TerminalConfig::default()
        };
        assert!(spec(settings.clone(), &missing).is_err());
        let dir = tempfile::tempdir().expect("tempdir");
        let present = TerminalConfig {
            cwd: Some(dir.path().display().to_string()),
            ..TerminalConfig::default()
        };
        let spec = spec(settings, &present).expect("cwd mount");
        assert_eq!(spec.default_cwd(), "/workspace");
        let body = spec.create_body("shared", &|_| None, true);
        let binds = body.host_config.and_then(|h| h.binds).unwrap_or_default();
        assert!(binds.contains(&format!("{}:/workspace", dir.path().display())));
    }

    #[test]
    fn forwarded_variables_come_from_the_daemon_and_explicit_ones_win() {
        let settings = DockerSettings {
            env: BTreeMap::from([("A".to_owned(), "explicit".to_owned())]),
            forward_env: vec!["A".to_owned(), "B".to_owned(), "MISSING".to_owned()],
            ..DockerSettings::default()
        };
        let spec = spec(settings, &TerminalConfig::default()).expect("spec");
        let body = spec.create_body(
            "shared",
            &|name| (name != "MISSING").then(|| format!("daemon-{name}")),
            true,
        );
        let env = body.env.unwrap_or_default();
        assert_eq!(env, vec!["A=explicit".to_owned(), "B=daemon-B".to_owned()]);
    }
}

//! `terminal:` read as Hermes reads it: config keys, their `TERMINAL_*` variables (the file
//! wins), placeholders, and the backends hermesd lacks reported.

use super::tests::{load_err, load_ok};
use super::{SandboxScope, TerminalBackend};

#[test]
fn keys_come_from_the_file_and_else_from_terminal_variables() {
    let yaml = "\
terminal:
  backend: docker
  cwd: /srv/project
  timeout: 90
  env_passthrough: [NOTION_TOKEN]
  persistent_shell: false
  lifetime_seconds: 60
  sandbox_scope: user
  docker_image: example/img:1
  docker_volumes: [\"/data:/data:ro\"]
  docker_env: {LANG: C.UTF-8}
  container_memory: 1024
";
    let loaded = load_ok(
        yaml,
        &[
            ("TERMINAL_DOCKER_IMAGE", "ignored/because-the-file-says:1"),
            ("TERMINAL_CONTAINER_CPU", "2.5"),
            ("TERMINAL_DOCKER_FORWARD_ENV", "[\"GITHUB_TOKEN\"]"),
            ("TERMINAL_DOCKER_NETWORK", "true"),
            ("DOCKER_HOST", "unix:///run/podman/podman.sock"),
        ],
    );
    let t = &loaded.config.terminal;
    assert_eq!(t.backend, TerminalBackend::Docker);
    assert_eq!(t.cwd.as_deref(), Some("/srv/project"));
    assert_eq!(t.timeout_secs, 90);
    assert_eq!(t.env_passthrough, ["NOTION_TOKEN"]);
    assert!(!t.persistent_shell);
    assert_eq!(t.lifetime_seconds, 60);
    assert_eq!(t.sandbox_scope, SandboxScope::User);
    assert_eq!(
        t.docker.image, "example/img:1",
        "the file wins over the variable"
    );
    assert_eq!(t.docker.volumes, ["/data:/data:ro"]);
    assert_eq!(
        t.docker.env.get("LANG").map(String::as_str),
        Some("C.UTF-8")
    );
    assert_eq!(t.docker.memory_mb, 1024);
    assert_eq!(t.docker.cpu, 2.5, "from TERMINAL_CONTAINER_CPU");
    assert_eq!(t.docker.forward_env, ["GITHUB_TOKEN"]);
    assert!(t.docker.network);
    assert_eq!(
        t.docker.host.as_deref(),
        Some("unix:///run/podman/podman.sock")
    );
    assert!(loaded.warnings.is_empty(), "{:?}", loaded.warnings);
}

#[test]
fn ssh_keys_read_their_terminal_ssh_variables_and_keep_the_remote_tilde() {
    let loaded = load_ok(
        "terminal:\n  cwd: ~/work\n",
        &[
            ("TERMINAL_ENV", "ssh"),
            ("TERMINAL_SSH_HOST", "build.example.net"),
            ("TERMINAL_SSH_USER", "ci"),
            ("TERMINAL_SSH_PORT", "2222"),
            ("TERMINAL_SSH_KEY", "/keys/id_ed25519"),
            ("HOME", "/home/daemon"),
        ],
    );
    let t = &loaded.config.terminal;
    assert_eq!(t.backend, TerminalBackend::Ssh);
    assert_eq!(t.ssh.host.as_deref(), Some("build.example.net"));
    assert_eq!(t.ssh.user.as_deref(), Some("ci"));
    assert_eq!(t.ssh.port, 2222);
    assert_eq!(
        t.ssh.key.as_deref(),
        Some(std::path::Path::new("/keys/id_ed25519"))
    );
    assert!(t.ssh.host_key_checking, "on unless configured off");
    assert_eq!(
        t.cwd.as_deref(),
        Some("~/work"),
        "the remote shell expands ~"
    );
}

#[test]
fn placeholders_mean_unset_and_local_tilde_is_expanded() {
    for placeholder in [".", "auto", "cwd"] {
        let loaded = load_ok(&format!("terminal:\n  cwd: \"{placeholder}\"\n"), &[]);
        assert_eq!(loaded.config.terminal.cwd, None, "{placeholder}");
    }
    let loaded = load_ok("terminal:\n  cwd: ~/proj\n", &[("HOME", "/home/ann")]);
    assert_eq!(
        loaded.config.terminal.cwd.as_deref(),
        Some("/home/ann/proj")
    );
}

#[test]
fn backends_hermesd_lacks_are_errors_and_their_keys_are_named() {
    let errors = load_err("terminal:\n  backend: modal\n", &[]);
    assert!(
        errors.iter().any(|e| e.contains("terminal.backend")
            && e.contains("modal backend is not supported")
            && e.contains("docker")),
        "{errors:?}"
    );
    let errors = load_err("terminal:\n  backend: ssh\n", &[]);
    assert!(errors.iter().any(|e| e.contains("ssh")), "{errors:?}");
    let loaded = load_ok(
        "terminal:\n  singularity_image: x\n  docker_extra_args: [\"--privileged\"]\n",
        &[],
    );
    assert_eq!(loaded.warnings.len(), 2, "{:?}", loaded.warnings);
    assert!(
        loaded
            .warnings
            .iter()
            .all(|w| w.contains("not supported by hermesd yet"))
    );
}

#[test]
fn bad_values_are_errors_naming_their_key() {
    let errors = load_err(
        "terminal:\n  timeout: soon\n  sandbox_scope: everyone\n  container_cpu: 0\n",
        &[],
    );
    for key in [
        "terminal.timeout",
        "terminal.sandbox_scope",
        "terminal.container_cpu",
    ] {
        assert!(errors.iter().any(|e| e.contains(key)), "{key}: {errors:?}");
    }
}

//! `terminal.backend: docker`: one long-lived container per scope on a Docker-compatible
//! engine (Docker, or podman's Docker API service), driven through the Engine API with
//! bollard, never a CLI. Commands and file operations are execs in that container; a
//! container that died or was removed is reported gone so the next call gets a fresh one.
//! The hardening follows Hermes: all capabilities dropped but the few a package manager
//! needs, no new privileges, a PID limit, tmpfs scratch space and no network unless
//! `docker_network` allows it. docs/sandbox-docker.md describes it for operators.

mod container;
mod engine;
mod exec;
mod factory;
mod files;
mod run;
mod scripts;
mod spec;

pub use container::DockerBackend;
pub use factory::DockerFactory;

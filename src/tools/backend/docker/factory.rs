//! Opens a scope's container: makes its host directories, creates it (replacing a leftover
//! of the same name, pulling a missing image, dropping the disk limit once if the storage
//! driver has none), starts it. Also `doctor`'s probe and the start-up sweep of containers a
//! killed daemon left behind.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bollard::errors::Error as EngineError;
use bollard::query_parameters::{
    CreateContainerOptions, CreateImageOptions, ListContainersOptionsBuilder,
    RemoveContainerOptions,
};
use futures_util::StreamExt;

use super::container::DockerBackend;
use super::engine::{Engine, describe, status};
use super::spec::ContainerSpec;
use crate::config::{DockerSettings, TerminalConfig};
use crate::tools::backend::{Backend, BackendError, BackendFactory, BackendFuture, Scope};

/// Opens one container per scope on a Docker-compatible engine.
#[derive(Debug)]
pub struct DockerFactory {
    engine: Arc<Engine>,
    spec: ContainerSpec,
    /// False once the engine refused `StorageOpt` (its storage driver has no size option).
    disk_limit: AtomicBool,
}

impl DockerFactory {
    /// Checks the settings; nothing is contacted until the first scope opens.
    pub fn new(
        settings: &DockerSettings,
        terminal: &TerminalConfig,
        home: &Path,
    ) -> Result<Self, String> {
        let engine = Engine::new(settings.host.as_deref())?;
        let spec = ContainerSpec::new(settings, terminal, home)?;
        Ok(Self {
            engine: Arc::new(engine),
            disk_limit: AtomicBool::new(spec.wants_disk_limit()),
            spec,
        })
    }

    async fn open_scope(&self, scope: &Scope) -> Result<Arc<dyn Backend>, BackendError> {
        let client = self.engine.client().await?;
        let scope_id = scope.id();
        let name = self.spec.container_name(&scope_id);
        for dir in self.spec.scope_dirs(&scope_id) {
            std::fs::create_dir_all(&dir).map_err(|e| BackendError::Unavailable {
                kind: "docker",
                detail: format!("cannot create the sandbox directory {}: {e}", dir.display()),
            })?;
        }
        let mut replaced = false;
        let mut pulled = false;
        let id = loop {
            let body = self.spec.create_body(
                &scope_id,
                &|name| std::env::var(name).ok(),
                self.disk_limit.load(Ordering::Relaxed),
            );
            let options = CreateContainerOptions {
                name: Some(name.clone()),
                platform: String::new(),
            };
            let error = match client.create_container(Some(options), body).await {
                Ok(created) => break created.id,
                Err(error) => error,
            };
            match status(&error) {
                // A container of this name is a leftover of this home and scope.
                Some(409) if !replaced => {
                    replaced = true;
                    tracing::info!(container = %name, "replacing a leftover container");
                    let force = RemoveContainerOptions {
                        force: true,
                        v: true,
                        link: false,
                    };
                    if let Err(e) = client.remove_container(&name, Some(force)).await {
                        return Err(self.engine.failed("removing a leftover container", &e));
                    }
                }
                Some(404) if !pulled => {
                    pulled = true;
                    self.pull().await?;
                }
                _ if self.disk_limit.load(Ordering::Relaxed) && about_storage_opt(&error) => {
                    self.disk_limit.store(false, Ordering::Relaxed);
                    tracing::warn!(
                        error = %describe(&error),
                        "the engine's storage driver cannot limit a container's disk; terminal.container_disk is not applied"
                    );
                }
                _ => {
                    return Err(self
                        .engine
                        .failed(&format!("creating container {name}"), &error));
                }
            }
        };
        if let Err(e) = client.start_container(&id, None).await {
            let force = RemoveContainerOptions {
                force: true,
                v: true,
                link: false,
            };
            let _ = client.remove_container(&id, Some(force)).await;
            return Err(self
                .engine
                .failed(&format!("starting container {name}"), &e));
        }
        tracing::info!(container = %name, image = %self.spec.image(), "container started");
        Ok(Arc::new(DockerBackend::new(
            Arc::clone(&self.engine),
            id,
            name,
            self.spec.default_cwd(),
        )))
    }

    /// Pulls the configured image after the engine said it has none.
    async fn pull(&self) -> Result<(), BackendError> {
        let client = self.engine.client().await?;
        let image = self.spec.image();
        tracing::info!(%image, "pulling the sandbox image");
        let options = CreateImageOptions {
            from_image: Some(image.to_owned()),
            ..CreateImageOptions::default()
        };
        let mut progress = client.create_image(Some(options), None, None);
        while let Some(step) = progress.next().await {
            if let Err(e) = step {
                return Err(BackendError::Unavailable {
                    kind: "docker",
                    detail: format!(
                        "image {image} is not on the engine at {} and pulling it failed: {}",
                        self.engine.shown(),
                        describe(&e)
                    ),
                });
            }
        }
        Ok(())
    }

    async fn describe_engine(&self) -> Result<String, BackendError> {
        let client = self.engine.client().await?;
        let version = client
            .version()
            .await
            .map_err(|e| self.engine.unavailable(&e))?;
        let name = version
            .components
            .as_ref()
            .and_then(|c| c.first())
            .map(|c| c.name.clone())
            .unwrap_or_else(|| "Docker Engine".to_owned());
        Ok(format!(
            "{name} {} (API {}) reachable at {}; image {}",
            version.version.as_deref().unwrap_or("?"),
            version.api_version.as_deref().unwrap_or("?"),
            self.engine.shown(),
            self.spec.image()
        ))
    }

    async fn sweep_home(&self) -> Result<usize, BackendError> {
        let client = self.engine.client().await?;
        let filters = HashMap::from([("label", self.spec.home_filter())]);
        let options = ListContainersOptionsBuilder::new()
            .all(true)
            .filters(&filters)
            .build();
        let found = client
            .list_containers(Some(options))
            .await
            .map_err(|e| self.engine.failed("listing containers", &e))?;
        let mut removed = 0;
        for container in found {
            let Some(id) = container.id else { continue };
            let force = RemoveContainerOptions {
                force: true,
                v: true,
                link: false,
            };
            match client.remove_container(&id, Some(force)).await {
                Ok(()) => removed += 1,
                Err(e) if status(&e) == Some(404) => {}
                Err(e) => {
                    tracing::warn!(error = %describe(&e), "could not remove a leftover container")
                }
            }
        }
        if removed > 0 {
            tracing::info!(removed, "removed containers an earlier run left behind");
        }
        Ok(removed)
    }
}

/// Whether the engine refused the create because of the disk size option.
fn about_storage_opt(error: &EngineError) -> bool {
    let text = describe(error).to_ascii_lowercase();
    text.contains("storage-opt") || text.contains("storageopt") || text.contains("storage opt")
}

impl BackendFactory for DockerFactory {
    fn kind(&self) -> &'static str {
        "docker"
    }

    fn open<'a>(&'a self, scope: &'a Scope) -> BackendFuture<'a, Arc<dyn Backend>> {
        Box::pin(self.open_scope(scope))
    }

    fn probe(&self) -> BackendFuture<'_, String> {
        Box::pin(self.describe_engine())
    }

    fn sweep(&self) -> BackendFuture<'_, usize> {
        Box::pin(self.sweep_home())
    }
}

//! `grpc.health.v1` driven by the stores: every served name reports SERVING
//! while all stores answer their ping, NOT_SERVING while any does not, and
//! NOT_SERVING from the moment shutdown starts (so load balancers drain us).

use crate::shutdown::Shutdown;
use adk_grpc_core::{AdkError, ArtifactService, MemoryService, SessionService};
use async_trait::async_trait;
use std::sync::Arc;
use std::time::Duration;
use tonic_health::ServingStatus;
use tonic_health::server::HealthReporter;

/// A store whose reachability decides the server's health.
#[async_trait]
pub trait StoreProbe: Send + Sync + 'static {
    /// Ok while the store answers.
    async fn ping(&self) -> adk_grpc_core::Result<()>;
}

#[async_trait]
impl StoreProbe for Arc<dyn SessionService> {
    async fn ping(&self) -> adk_grpc_core::Result<()> {
        SessionService::ping(self.as_ref()).await
    }
}

#[async_trait]
impl StoreProbe for Arc<dyn ArtifactService> {
    async fn ping(&self) -> adk_grpc_core::Result<()> {
        ArtifactService::ping(self.as_ref()).await
    }
}

#[async_trait]
impl StoreProbe for Arc<dyn MemoryService> {
    async fn ping(&self) -> adk_grpc_core::Result<()> {
        MemoryService::ping(self.as_ref()).await
    }
}

/// A named store to ping.
pub(crate) struct NamedProbe {
    pub name: String,
    pub probe: Box<dyn StoreProbe>,
    /// The last outcome, so transitions are logged once rather than every tick.
    reachable: Option<bool>,
}

impl NamedProbe {
    pub fn new(name: String, probe: Box<dyn StoreProbe>) -> Self {
        NamedProbe {
            name,
            probe,
            reachable: None,
        }
    }
}

pub(crate) struct HealthMonitor {
    reporter: HealthReporter,
    /// "" (the whole server) and every served service name.
    names: Vec<String>,
    probes: Vec<NamedProbe>,
    interval: Duration,
    /// What watchers last saw: the reporter notifies `Watch` streams on every
    /// update, changed or not, so unchanged statuses are not re-sent.
    published: Option<ServingStatus>,
}

impl HealthMonitor {
    pub fn new(reporter: HealthReporter, names: Vec<String>, probes: Vec<NamedProbe>, interval: Duration) -> Self {
        HealthMonitor {
            reporter,
            names,
            probes,
            interval,
            published: None,
        }
    }

    /// Pings every store once and publishes the result for every name.
    pub async fn check_once(&mut self) {
        let mut all_reachable = true;
        for probe in &mut self.probes {
            // A ping that hangs longer than the interval counts as unreachable: the
            // next check is due anyway.
            let outcome = match tokio::time::timeout(self.interval, probe.probe.ping()).await {
                Ok(outcome) => outcome,
                Err(_) => Err(AdkError::DeadlineExceeded(format!(
                    "no answer within {:?}",
                    self.interval
                ))),
            };
            let reachable = outcome.is_ok();
            if probe.reachable != Some(reachable) {
                match &outcome {
                    Ok(()) if probe.reachable.is_some() => {
                        tracing::info!(store = %probe.name, "store answers again")
                    }
                    Ok(()) => tracing::debug!(store = %probe.name, "store reachable"),
                    Err(err) => {
                        tracing::warn!(store = %probe.name, error = %err, "store unreachable; health NOT_SERVING")
                    }
                }
                probe.reachable = Some(reachable);
            }
            all_reachable &= reachable;
        }
        let status = if all_reachable {
            ServingStatus::Serving
        } else {
            ServingStatus::NotServing
        };
        self.publish(status).await;
    }

    async fn publish(&mut self, status: ServingStatus) {
        if self.published == Some(status) {
            return;
        }
        self.published = Some(status);
        for name in &self.names {
            self.reporter.set_service_status(name, status).await;
        }
    }

    /// Re-checks every interval until shutdown, then reports NOT_SERVING for good.
    pub async fn run(mut self, shutdown: Shutdown) {
        let mut ticks = tokio::time::interval(self.interval);
        // After a slow ping, carry on at the normal pace instead of bursting to catch up.
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let stopping = shutdown.triggered();
        tokio::pin!(stopping);
        loop {
            tokio::select! {
                _ = &mut stopping => break,
                _ = ticks.tick() => self.check_once().await,
            }
        }
        self.publish(ServingStatus::NotServing).await;
    }
}

//! End-to-end tests: the real gateway on a loopback port against the upstream
//! simulator, talked to over HTTP. Run with `make test` (which builds the
//! guest components they load first).

mod common;

mod auth;
mod billing;
mod chat;
mod cli;
mod console;
mod crash;
mod edge;
mod failover;
mod families;
mod hotswap;
mod limits;
mod matrix;
mod observability;
mod openapi;
mod policies;
mod property;
mod protocols;
mod reload;
mod runtime;
mod sandbox;
mod tokens;
mod video;
mod webhooks;

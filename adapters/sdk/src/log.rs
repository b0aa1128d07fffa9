//! Log lines through the host's `log` import, attributed by the host to the
//! component and the request. Off wasm (the SDK's native unit tests) there is
//! no host, so the lines are dropped.

use crate::bindings::adapter::gateway::plugin::log::{log, Level};

fn emit(level: Level, message: &str) {
    if cfg!(target_arch = "wasm32") {
        log(level, message);
    }
}

pub fn debug(message: &str) {
    emit(Level::Debug, message);
}

pub fn info(message: &str) {
    emit(Level::Info, message);
}

pub fn warn(message: &str) {
    emit(Level::Warn, message);
}

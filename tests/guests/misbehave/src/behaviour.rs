use gateway_guest_sdk::bindings::types::RequestCtx;

/// What the guest does, chosen by the channel's upstream model name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Behaviour {
    /// `loop`: `translate-request` never returns.
    Loop,
    /// `oom`: `translate-request` allocates until the host's limit stops it.
    Oom,
    /// `trap`: `translate-request` executes `unreachable`.
    Trap,
    /// `garbage`: `translate-request` returns a request no host may send.
    Garbage,
    /// `garbage-response`: `translate-response` returns an impossible answer.
    GarbageResponse,
    /// `loop-stream`: the stream translator's `push` never returns from
    /// the third event on.
    LoopStream,
    /// `splice-lies`: asks the host to splice, and its `translate-response`
    /// writes another answer than the host's rule would (what `gateway
    /// adapter test` must catch).
    SpliceLies,
    /// `alike-lies`: says calls alike get the host's edit of their body as
    /// their request (`stream-splice.alike-requests`), and sends another
    /// body (what the host's own check and `gateway adapter test` must
    /// catch).
    AlikeLies,
    /// Anything else: a well-behaved OpenAI passthrough.
    Normal,
}

impl Behaviour {
    pub fn of(ctx: &RequestCtx) -> Self {
        Self::named(&ctx.upstream_model)
    }

    pub fn named(upstream_model: &str) -> Self {
        match upstream_model {
            "loop" => Self::Loop,
            "oom" => Self::Oom,
            "trap" => Self::Trap,
            "garbage" => Self::Garbage,
            "garbage-response" => Self::GarbageResponse,
            "loop-stream" => Self::LoopStream,
            "splice-lies" => Self::SpliceLies,
            "alike-lies" => Self::AlikeLies,
            _ => Self::Normal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_pick_behaviours() {
        assert_eq!(Behaviour::named("loop"), Behaviour::Loop);
        assert_eq!(Behaviour::named("oom"), Behaviour::Oom);
        assert_eq!(Behaviour::named("trap"), Behaviour::Trap);
        assert_eq!(Behaviour::named("garbage"), Behaviour::Garbage);
        assert_eq!(
            Behaviour::named("garbage-response"),
            Behaviour::GarbageResponse
        );
        assert_eq!(Behaviour::named("loop-stream"), Behaviour::LoopStream);
        assert_eq!(Behaviour::named("splice-lies"), Behaviour::SpliceLies);
        assert_eq!(Behaviour::named("alike-lies"), Behaviour::AlikeLies);
        assert_eq!(Behaviour::named("sim-chat"), Behaviour::Normal);
        assert_eq!(Behaviour::named("LOOP"), Behaviour::Normal);
    }
}

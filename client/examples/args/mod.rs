//! The command line the examples share: `[NAMESRV [TOPIC [COUNT]]]`, the name server
//! defaulting to `$FERROMQ_NAMESRV`, else `127.0.0.1:9876`.

/// Where to send and how much.
pub struct Args {
    /// `host:port` of a name server (`;`-separated for several).
    pub namesrv: String,
    /// The topic the example uses.
    pub topic: String,
    /// How many messages.
    pub count: usize,
}

/// The command line, with the example's default topic and count.
pub fn parse(topic: &str, count: usize) -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let namesrv = args
        .next()
        .or_else(|| std::env::var("FERROMQ_NAMESRV").ok())
        .unwrap_or_else(|| "127.0.0.1:9876".to_owned());
    let topic = args.next().unwrap_or_else(|| topic.to_owned());
    let count = match args.next() {
        Some(n) => n.parse().map_err(|e| format!("count {n}: {e}"))?,
        None => count,
    };
    Ok(Args {
        namesrv,
        topic,
        count,
    })
}

/// The exit status of an example's outcome, its error printed.
pub fn exit(example: &str, outcome: Result<(), String>) -> std::process::ExitCode {
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("{example}: {error}");
            std::process::ExitCode::FAILURE
        }
    }
}

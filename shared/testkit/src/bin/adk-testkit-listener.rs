//! A minimal process for testing `ServiceProcess` itself: it accepts TCP
//! connections on `--listen ADDR` until killed. `--fail-at-startup` makes it
//! exit before listening, the way a misconfigured service would.

use std::net::TcpListener;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if let Ok(greeting) = std::env::var("ADK_TESTKIT_GREETING") {
        println!("greeting: {greeting}");
    }
    if args.iter().any(|arg| arg == "--fail-at-startup") {
        eprintln!("startup failed on purpose");
        std::process::exit(2);
    }
    let listen = args
        .windows(2)
        .find(|pair| pair[0] == "--listen")
        .map(|pair| pair[1].clone())
        .expect("usage: adk-testkit-listener [--fail-at-startup] --listen ADDR");
    let listener = TcpListener::bind(&listen).expect("bind --listen address");
    println!("listening on {listen}");
    for connection in listener.incoming() {
        drop(connection);
    }
}

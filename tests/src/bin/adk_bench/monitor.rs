//! `redis-cli MONITOR` for the benches that read what a server sends Redis: the
//! EVALSHA an AppendEvent sends (`append-path`), the commands a runner turn sends
//! (`runner`).

use anyhow::{Context, Result, bail};
use std::process::Stdio;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStdout, Command};

/// `redis-cli MONITOR` on one redis-server, listening once started; stopped when dropped.
pub(crate) struct Monitor {
    _process: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl Monitor {
    /// Starts `redis-cli MONITOR` on the redis-server at `port` and waits until it listens.
    pub(crate) async fn start(port: u16) -> Result<Monitor> {
        let mut process = Command::new("redis-cli")
            .args(["-p", &port.to_string(), "monitor"])
            .stdout(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .context("start redis-cli monitor")?;
        let mut lines = BufReader::new(process.stdout.take().context("monitor's stdout")?).lines();
        // MONITOR answers OK once it listens.
        let ready = tokio::time::timeout(Duration::from_secs(10), lines.next_line()).await;
        anyhow::ensure!(
            matches!(ready, Ok(Ok(Some(ref line))) if line == "OK"),
            "redis-cli monitor did not start"
        );
        Ok(Monitor {
            _process: process,
            lines,
        })
    }

    /// The next command Redis ran, as MONITOR prints it
    /// (`<time> [<db> <client address, or lua>] "<COMMAND>" "<arg>" …`).
    pub(crate) async fn next_line(&mut self) -> Result<Option<String>> {
        Ok(self.lines.next_line().await?)
    }
}

/// A MONITOR line's command name (upper case), and whether a script ran it (`[0 lua]`)
/// rather than a client sent it.
pub(crate) fn monitor_command(line: &str) -> Result<(String, bool)> {
    let open = line.find(" [").context("no client in a MONITOR line")?;
    let close = open + line[open..].find("] ").context("no client in a MONITOR line")?;
    let by_script = line[open + 2..close].ends_with(" lua");
    let args = monitor_arguments(&line[close + 2..])?;
    let name = args.first().context("no command in a MONITOR line")?;
    Ok((String::from_utf8_lossy(name).to_ascii_uppercase(), by_script))
}

/// The arguments of a `MONITOR` line's command (`"EVALSHA" "…" …`), unquoted as Redis
/// quotes them (`sdscatrepr`: `\\`, `\"`, `\n`, `\r`, `\t`, `\a`, `\b`, `\xHH`).
pub(crate) fn monitor_arguments(line: &str) -> Result<Vec<Vec<u8>>> {
    let mut args = Vec::new();
    let mut bytes = line.bytes();
    while let Some(b) = bytes.next() {
        match b {
            b' ' => continue,
            b'"' => {}
            other => bail!("unexpected {:?} in a MONITOR line", other as char),
        }
        let mut arg = Vec::new();
        loop {
            match bytes.next().context("unterminated argument in a MONITOR line")? {
                b'"' => break,
                b'\\' => match bytes.next().context("dangling escape in a MONITOR line")? {
                    b'n' => arg.push(b'\n'),
                    b'r' => arg.push(b'\r'),
                    b't' => arg.push(b'\t'),
                    b'a' => arg.push(7),
                    b'b' => arg.push(8),
                    b'x' => {
                        let hex = [bytes.next().unwrap_or(b'?'), bytes.next().unwrap_or(b'?')];
                        let hex = std::str::from_utf8(&hex)?;
                        arg.push(u8::from_str_radix(hex, 16).context("a bad \\x escape")?);
                    }
                    other => arg.push(other),
                },
                other => arg.push(other),
            }
        }
        args.push(arg);
    }
    Ok(args)
}

#[cfg(test)]
mod tests {
    #[test]
    fn monitor_lines_unquote() {
        let args = super::monitor_arguments(r#""EVALSHA" "ab" "a\"b\\c\x00\xff\n""#).unwrap();
        assert_eq!(
            args,
            vec![b"EVALSHA".to_vec(), b"ab".to_vec(), b"a\"b\\c\x00\xff\n".to_vec()]
        );
    }

    #[test]
    fn monitor_lines_name_their_command_and_who_sent_it() {
        let client = super::monitor_command(r#"1732838400.123456 [0 127.0.0.1:41234] "evalsha" "ab" "1" "k""#);
        assert_eq!(client.unwrap(), ("EVALSHA".to_string(), false));
        let script = super::monitor_command(r#"1732838400.123457 [0 lua] "GET" "adk:lease:{a:u}:s""#);
        assert_eq!(script.unwrap(), ("GET".to_string(), true));
    }
}

//! What a script reads against what its builder sends: every literal `KEYS[n]` and
//! `ARGV[n]` the script reads is a position the builder fills, and the reverse; the
//! variable part after the fixed arguments (field/value pairs, or the memory script's
//! entries) starts at the script's `local tail`.

use super::ScriptArgs;
use redis::Script;
use std::collections::BTreeSet;

/// The positions a script reads from `array` by a literal index (`KEYS[3]`; not `KEYS[i]`).
fn indices_read(source: &str, array: &str) -> BTreeSet<usize> {
    let opening = format!("{array}[");
    source
        .match_indices(&opening)
        .filter_map(|(at, _)| {
            let rest = &source[at + opening.len()..];
            rest[..rest.find(']')?].parse().ok()
        })
        .collect()
}

/// Where a script starts reading field/value pairs (`local tail = N`), if it takes any.
fn tail_start(source: &str) -> Option<usize> {
    let rest = &source[source.find("local tail = ")? + "local tail = ".len()..];
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    Some(digits.parse().expect("`local tail = ` takes a number"))
}

/// The KEYS and the ARGV `args` sends, as the EVALSHA on the wire has them.
fn sent<A: ScriptArgs>(args: &A) -> (Vec<Vec<u8>>, Vec<Vec<u8>>) {
    let script = Script::new(A::SOURCE);
    let mut invocation = script.prepare_invoke();
    args.push(&mut invocation).unwrap();
    let cmd = redis::Cmd::invoke_script(&invocation);
    let words: Vec<Vec<u8>> = cmd
        .args_iter()
        .map(|arg| match arg {
            redis::Arg::Simple(bytes) => bytes.to_vec(),
            _ => unreachable!("a script call has plain arguments only"),
        })
        .collect();
    assert_eq!(words[0], b"EVALSHA");
    let key_count: usize = std::str::from_utf8(&words[2]).unwrap().parse().unwrap();
    let (keys, args) = words[3..].split_at(key_count);
    (keys.to_vec(), args.to_vec())
}

/// Asserts that the script of `A` reads exactly what `A` sends. `bare` is a call with
/// every optional key and its fewest field/value pairs, `bare_pairs` of them (most
/// scripts: none), and nothing else in its variable part; `paired` the same call with
/// more in it.
pub(crate) fn assert_reads_what_is_sent<A: ScriptArgs>(name: &str, bare: &A, bare_pairs: usize, paired: &A) {
    let source = A::SOURCE;
    let (keys, args) = sent(bare);
    let (paired_keys, paired_args) = sent(paired);
    assert_eq!(
        indices_read(source, "KEYS"),
        (1..=keys.len()).collect(),
        "{name}: the KEYS the script reads (left) are not the {} its builder sends",
        keys.len()
    );
    let fixed = args.len() - 2 * bare_pairs;
    assert_eq!(
        indices_read(source, "ARGV"),
        (1..=fixed).collect(),
        "{name}: the ARGV the script reads (left) are not the {fixed} its builder sends before its pairs",
    );
    assert_eq!(paired_keys.len(), keys.len(), "{name}: pairs go to ARGV only");
    match tail_start(source) {
        Some(tail) => {
            assert_eq!(tail, fixed + 1, "{name}: pairs start right after the fixed ARGV");
            assert!(
                paired_args.len() > args.len(),
                "{name}: the builder sends nothing more after its fixed ARGV"
            );
        }
        None => {
            assert_eq!(bare_pairs, 0, "{name}: the script reads no pairs");
            assert_eq!(paired_args.len(), args.len(), "{name}: the script reads no pairs");
        }
    }
}

#[test]
fn the_parser_sees_literal_positions_only() {
    let source = "KEYS[1] KEYS[i] ARGV[12] ARGV[at + 1] #ARGV local tail = 17\n";
    assert_eq!(indices_read(source, "KEYS"), BTreeSet::from([1]));
    assert_eq!(indices_read(source, "ARGV"), BTreeSet::from([12]));
    assert_eq!(tail_start(source), Some(17));
    assert_eq!(tail_start("return 1"), None);
}

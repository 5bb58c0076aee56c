//! Inline files (a part's `inline_data`) as ADK's models send them.
//!
//! What ADK's Gemini model sends in place of an inline file the Gemini API does not take
//! (ADK converts every inline part of a request's contents so, before each call): images,
//! audio, video and PDFs go as they are, the type's name in lower case; a DOCX file goes as
//! the text of its paragraphs, a text file (`text/*`, JSON, CSV, XML, SVG) as its text,
//! anything else as a line naming it. A converted part is a plain text: a thought mark or
//! signature it carried is not sent, as ADK's new part carries none. See docs/agents.md
//! ("Files in the contents").

use std::borrow::Cow;
use std::io::{Cursor, Read};
use std::sync::LazyLock;

use adk_grpc_core::{Part, PartKind};
use regex::Regex;

/// The name ADK gives every inline file (the API keeps no file names).
const FILE_NAME: &str = "inline-file";
/// How much of a DOCX file's document ADK reads, against zip bombs.
const DOCX_XML_LIMIT: u64 = 10 * 1024 * 1024;
const DOCX: &str = "application/vnd.openxmlformats-officedocument.wordprocessingml.document";
/// Types under a prefix Gemini takes inline that it still refuses (XML-based images).
const REFUSED_INLINE: [&str; 3] = ["image/svg", "image/svg+xml", "image/xml"];
/// Types that are text though not `text/*`.
const TEXT_LIKE: [&str; 7] = [
    "application/csv",
    "application/json",
    "application/svg+xml",
    "application/xml",
    "image/svg",
    "image/svg+xml",
    "image/xml",
];

/// `part` as ADK's Gemini model sends it.
pub(crate) fn safe_for_gemini(part: &Part) -> Cow<'_, Part> {
    let PartKind::InlineData { mime_type, data } = &part.kind else {
        return Cow::Borrowed(part);
    };
    let essence = mime_essence(mime_type);
    if gemini_takes_inline(&essence) {
        // The type's name in lower case, its parameters as they were.
        let canonical = match mime_type.split_once(';') {
            Some((_, parameters)) => format!("{essence};{parameters}"),
            None => essence.to_string(),
        };
        if canonical == *mime_type {
            return Cow::Borrowed(part);
        }
        let mut sent = part.clone();
        sent.kind = PartKind::InlineData {
            mime_type: canonical,
            data: data.clone(),
        };
        return Cow::Owned(sent);
    }
    let essence = if essence.is_empty() {
        "application/octet-stream"
    } else {
        &essence
    };
    Cow::Owned(Part::text_part(text_in_place_of(essence, data)))
}

/// A MIME type as ADK's models compare it: without its parameters, in lower case.
pub(crate) fn mime_essence(mime_type: &str) -> String {
    mime_type.split(';').next().unwrap_or_default().trim().to_lowercase()
}

fn gemini_takes_inline(essence: &str) -> bool {
    !REFUSED_INLINE.contains(&essence)
        && (["image/", "audio/", "video/"]
            .iter()
            .any(|prefix| essence.starts_with(prefix))
            || essence == "application/pdf")
}

fn text_in_place_of(essence: &str, data: &[u8]) -> String {
    if (essence == DOCX || essence == "application/octet-stream")
        && let Some(text) = docx_text(data)
    {
        return text;
    }
    if essence.starts_with("text/") || TEXT_LIKE.contains(&essence) {
        return String::from_utf8_lossy(data).into_owned();
    }
    let size_kb = data.len() as f64 / 1024.0;
    format!(
        "[Binary artifact: {FILE_NAME}, type: {essence}, size: {size_kb:.1} KB. Content cannot be displayed inline.]"
    )
}

/// The paragraphs of a DOCX file's document, a line each, found with ADK's patterns (no XML
/// parser, so no entity expansion; the text is as the XML writes it). None when `data` is no
/// zip archive holding `word/document.xml`.
fn docx_text(data: &[u8]) -> Option<String> {
    static NAMESPACE: LazyLock<Regex> = LazyLock::new(|| {
        Regex::new(r#"xmlns:(\w+)="http://schemas.openxmlformats.org/wordprocessingml/2006/main""#)
            .expect("the namespace pattern")
    });
    let mut archive = zip::ZipArchive::new(Cursor::new(data)).ok()?;
    let document = archive.by_name("word/document.xml").ok()?;
    let mut bytes = Vec::new();
    document.take(DOCX_XML_LIMIT).read_to_end(&mut bytes).ok()?;
    // Undecodable bytes are left out, as ADK decodes with errors="ignore".
    let xml: String = bytes.utf8_chunks().map(|chunk| chunk.valid()).collect();
    let prefix = NAMESPACE
        .captures(&xml)
        .map_or("w", |found| found.get(1).map_or("w", |p| p.as_str()));
    // Word's own prefix, `w`, nearly always: its patterns are compiled once.
    static W: LazyLock<(Regex, Regex)> = LazyLock::new(|| docx_patterns("w").expect("the w patterns"));
    let other;
    let (paragraph, run_text) = if prefix == "w" {
        (&W.0, &W.1)
    } else {
        other = docx_patterns(prefix)?;
        (&other.0, &other.1)
    };
    let paragraphs: Vec<String> = paragraph
        .split(&xml)
        .filter_map(|piece| {
            let texts: Vec<&str> = run_text
                .captures_iter(piece)
                .filter_map(|c| c.get(1))
                .map(|m| m.as_str())
                .collect();
            (!texts.is_empty()).then(|| texts.concat())
        })
        .collect();
    Some(paragraphs.join("\n"))
}

/// ADK's patterns of a paragraph's start and of a run's text, for namespace `prefix`.
fn docx_patterns(prefix: &str) -> Option<(Regex, Regex)> {
    let paragraph = Regex::new(&format!("<{prefix}:p(?:[^>]*)>")).ok()?;
    let run_text = Regex::new(&format!("<{prefix}:t(?:[^>]*)>([^<]*)</{prefix}:t>")).ok()?;
    Some((paragraph, run_text))
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn inline(mime_type: &str, data: &[u8]) -> Part {
        Part::inline_data(mime_type, data)
    }

    fn sent(part: &Part) -> Part {
        safe_for_gemini(part).into_owned()
    }

    fn docx(document: &str) -> Vec<u8> {
        let mut archive = zip::ZipWriter::new(Cursor::new(Vec::new()));
        archive
            .start_file("word/document.xml", zip::write::SimpleFileOptions::default())
            .unwrap();
        archive.write_all(document.as_bytes()).unwrap();
        archive.finish().unwrap().into_inner()
    }

    #[test]
    fn media_and_pdfs_go_as_they_are_with_the_type_in_lower_case() {
        let png = inline("image/png", b"x");
        assert!(matches!(safe_for_gemini(&png), Cow::Borrowed(_)));
        assert_eq!(
            sent(&inline("application/pdf", b"%PDF")),
            inline("application/pdf", b"%PDF")
        );
        assert_eq!(sent(&inline(" Image/PNG ;q=1", b"x")), inline("image/png;q=1", b"x"));
        assert_eq!(sent(&inline("Audio/WAV", b"x")), inline("audio/wav", b"x"));
    }

    #[test]
    fn a_text_file_goes_as_a_plain_text_its_thought_mark_left_behind() {
        let thought = Part {
            thought: Some(true),
            ..inline("text/plain; charset=utf-8", "Seven to ten.".as_bytes())
        };
        assert_eq!(sent(&thought), Part::text_part("Seven to ten."));
        assert_eq!(
            sent(&inline("application/json", br#"{"a": 1}"#)),
            Part::text_part(r#"{"a": 1}"#)
        );
        assert_eq!(sent(&inline("image/svg+xml", b"<svg/>")), Part::text_part("<svg/>"));
        assert_eq!(sent(&inline("text/csv", b"caf\xe9")), Part::text_part("caf\u{fffd}"));
    }

    #[test]
    fn any_other_file_goes_as_a_line_naming_it() {
        assert_eq!(
            sent(&inline("application/zip", &[0; 256])),
            Part::text_part(
                "[Binary artifact: inline-file, type: application/zip, size: 0.2 KB. Content cannot be displayed inline.]"
            )
        );
        assert_eq!(
            sent(&inline("", &[0; 2048])),
            Part::text_part(
                "[Binary artifact: inline-file, type: application/octet-stream, size: 2.0 KB. Content cannot be \
                 displayed inline.]"
            )
        );
        // Not a zip archive: a DOCX type is named as any other file.
        assert!(
            sent(&inline(DOCX, b"not a zip"))
                .text()
                .unwrap()
                .starts_with("[Binary artifact: inline-file, type: application/vnd")
        );
    }

    #[test]
    fn a_docx_file_goes_as_its_paragraphs_text_a_line_each() {
        let document = r#"<?xml version="1.0"?><x:document xmlns:x="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><x:body><x:p><x:pPr/><x:r><x:t>Pool hours:</x:t></x:r><x:r><x:t xml:space="preserve"> 7 to 22</x:t></x:r></x:p><x:p><x:r><x:t>Sauna &amp; spa</x:t></x:r></x:p><x:p></x:p></x:body></x:document>"#;
        assert_eq!(
            sent(&inline(DOCX, &docx(document))),
            Part::text_part("Pool hours: 7 to 22\nSauna &amp; spa")
        );
        // ADK reads any octet stream that is a DOCX as one.
        assert_eq!(
            sent(&inline("application/octet-stream", &docx("<w:p><w:t>Hi</w:t></w:p>"))),
            Part::text_part("Hi")
        );
    }
}

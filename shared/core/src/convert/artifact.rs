//! `adk.v1` artifact messages <-> `crate::artifact` types. Only the shape is checked
//! here (a reference or part that is required, a part or struct that cannot decode);
//! every artifact rule is the service's (`crate::artifact::CoreArtifactService`).

use super::{map_from_struct, map_to_struct, timestamp_from_proto, timestamp_to_proto};
use crate::Part;
use crate::artifact::{
    ArtifactMetadata, DeleteRequest, DownloadRequest, ListRequest, LoadRequest, SaveRequest, SaveWithMetadata,
    UploadRequest, VersionsRequest, piece_size,
};
use crate::error::{AdkError, Result};
use adk_grpc_proto::v1 as pb;

/// The four coordinates of an artifact, which every request but a listing needs.
fn location(r: Option<pb::ArtifactRef>) -> Result<pb::ArtifactRef> {
    r.ok_or_else(|| AdkError::invalid("ref", "is required (app_name, user_id, session_id, file_name)"))
}

fn artifact_ref(app_name: &str, user_id: &str, session_id: &str, file_name: &str) -> pb::ArtifactRef {
    pb::ArtifactRef {
        app_name: app_name.into(),
        user_id: user_id.into(),
        session_id: session_id.into(),
        file_name: file_name.into(),
    }
}

fn load_request(at: pb::ArtifactRef, version: Option<i64>) -> LoadRequest {
    LoadRequest {
        app_name: at.app_name,
        user_id: at.user_id,
        session_id: at.session_id,
        file_name: at.file_name,
        version,
    }
}

fn load_ref(r: &LoadRequest) -> Option<pb::ArtifactRef> {
    Some(artifact_ref(&r.app_name, &r.user_id, &r.session_id, &r.file_name))
}

impl TryFrom<pb::SaveArtifactRequest> for SaveWithMetadata {
    type Error = AdkError;
    fn try_from(r: pb::SaveArtifactRequest) -> Result<Self> {
        let at = location(r.r#ref)?;
        let part = r
            .part
            .as_ref()
            .ok_or_else(|| AdkError::invalid("part", "is required"))?;
        let save = SaveRequest {
            part: Part::try_from(part)?,
            version: r.version,
            app_name: at.app_name,
            user_id: at.user_id,
            session_id: at.session_id,
            file_name: at.file_name,
        };
        Ok(SaveWithMetadata {
            save,
            custom_metadata: map_from_struct("custom_metadata", r.custom_metadata.as_ref())?,
        })
    }
}

impl From<&SaveRequest> for pb::SaveArtifactRequest {
    fn from(r: &SaveRequest) -> Self {
        pb::SaveArtifactRequest {
            r#ref: Some(artifact_ref(&r.app_name, &r.user_id, &r.session_id, &r.file_name)),
            part: Some(pb::Part::from(&r.part)),
            version: r.version,
            custom_metadata: None,
        }
    }
}

impl TryFrom<pb::UploadHeader> for UploadRequest {
    type Error = AdkError;
    fn try_from(h: pb::UploadHeader) -> Result<Self> {
        let at = location(h.r#ref)?;
        Ok(UploadRequest {
            app_name: at.app_name,
            user_id: at.user_id,
            session_id: at.session_id,
            file_name: at.file_name,
            mime_type: h.mime_type,
            is_text: h.is_text,
            // Only SaveArtifact takes file_data parts; an upload's bytes are content.
            is_file_uri: false,
            version: h.version,
            custom_metadata: map_from_struct("header.custom_metadata", h.custom_metadata.as_ref())?,
            size_hint: h.size_bytes,
            display_name: h.display_name,
        })
    }
}

impl From<&UploadRequest> for pb::UploadHeader {
    fn from(u: &UploadRequest) -> Self {
        pb::UploadHeader {
            r#ref: Some(artifact_ref(&u.app_name, &u.user_id, &u.session_id, &u.file_name)),
            mime_type: u.mime_type.clone(),
            version: u.version,
            custom_metadata: Some(map_to_struct(u.custom_metadata.iter())),
            is_text: u.is_text,
            size_bytes: u.size_hint,
            display_name: u.display_name.clone(),
        }
    }
}

impl TryFrom<pb::LoadArtifactRequest> for LoadRequest {
    type Error = AdkError;
    fn try_from(r: pb::LoadArtifactRequest) -> Result<Self> {
        Ok(load_request(location(r.r#ref)?, r.version))
    }
}

impl From<&LoadRequest> for pb::LoadArtifactRequest {
    fn from(r: &LoadRequest) -> Self {
        pb::LoadArtifactRequest {
            r#ref: load_ref(r),
            version: r.version,
        }
    }
}

impl TryFrom<pb::GetArtifactMetadataRequest> for LoadRequest {
    type Error = AdkError;
    fn try_from(r: pb::GetArtifactMetadataRequest) -> Result<Self> {
        Ok(load_request(location(r.r#ref)?, r.version))
    }
}

impl From<&LoadRequest> for pb::GetArtifactMetadataRequest {
    fn from(r: &LoadRequest) -> Self {
        pb::GetArtifactMetadataRequest {
            r#ref: load_ref(r),
            version: r.version,
        }
    }
}

/// The chunk size: 0 means the default; capped to stay within one message.
impl TryFrom<pb::DownloadArtifactRequest> for DownloadRequest {
    type Error = AdkError;
    fn try_from(r: pb::DownloadArtifactRequest) -> Result<Self> {
        Ok(DownloadRequest {
            load: load_request(location(r.r#ref)?, r.version),
            chunk_bytes: piece_size(r.chunk_size as usize),
        })
    }
}

impl From<&DownloadRequest> for pb::DownloadArtifactRequest {
    fn from(r: &DownloadRequest) -> Self {
        pb::DownloadArtifactRequest {
            r#ref: load_ref(&r.load),
            version: r.load.version,
            chunk_size: r.chunk_bytes.min(u32::MAX as usize) as u32,
        }
    }
}

impl TryFrom<pb::DeleteArtifactRequest> for DeleteRequest {
    type Error = AdkError;
    fn try_from(r: pb::DeleteArtifactRequest) -> Result<Self> {
        let at = location(r.r#ref)?;
        Ok(DeleteRequest {
            app_name: at.app_name,
            user_id: at.user_id,
            session_id: at.session_id,
            file_name: at.file_name,
            version: r.version,
        })
    }
}

impl From<&DeleteRequest> for pb::DeleteArtifactRequest {
    fn from(r: &DeleteRequest) -> Self {
        pb::DeleteArtifactRequest {
            r#ref: Some(artifact_ref(&r.app_name, &r.user_id, &r.session_id, &r.file_name)),
            version: r.version,
        }
    }
}

impl From<pb::ListArtifactsRequest> for ListRequest {
    fn from(r: pb::ListArtifactsRequest) -> Self {
        ListRequest {
            app_name: r.app_name,
            user_id: r.user_id,
            session_id: r.session_id,
        }
    }
}

impl From<&ListRequest> for pb::ListArtifactsRequest {
    fn from(r: &ListRequest) -> Self {
        pb::ListArtifactsRequest {
            app_name: r.app_name.clone(),
            user_id: r.user_id.clone(),
            session_id: r.session_id.clone(),
        }
    }
}

impl TryFrom<pb::ListVersionsRequest> for VersionsRequest {
    type Error = AdkError;
    fn try_from(r: pb::ListVersionsRequest) -> Result<Self> {
        let at = location(r.r#ref)?;
        Ok(VersionsRequest {
            app_name: at.app_name,
            user_id: at.user_id,
            session_id: at.session_id,
            file_name: at.file_name,
        })
    }
}

impl From<&VersionsRequest> for pb::ListVersionsRequest {
    fn from(r: &VersionsRequest) -> Self {
        pb::ListVersionsRequest {
            r#ref: Some(artifact_ref(&r.app_name, &r.user_id, &r.session_id, &r.file_name)),
        }
    }
}

impl From<&ArtifactMetadata> for pb::ArtifactMetadata {
    fn from(m: &ArtifactMetadata) -> Self {
        pb::ArtifactMetadata {
            file_name: m.file_name.clone(),
            version: m.version,
            mime_type: m.mime_type.clone(),
            size_bytes: m.size_bytes,
            create_time: Some(timestamp_to_proto(m.create_time)),
            custom_metadata: Some(map_to_struct(m.custom_metadata.iter())),
            is_text: m.is_text,
            is_file_uri: m.is_file_uri,
            display_name: m.display_name.clone(),
        }
    }
}

impl TryFrom<&pb::ArtifactMetadata> for ArtifactMetadata {
    type Error = AdkError;
    fn try_from(m: &pb::ArtifactMetadata) -> Result<Self> {
        let create_time = m
            .create_time
            .as_ref()
            .ok_or_else(|| AdkError::invalid("metadata.create_time", "is missing"))
            .and_then(|t| timestamp_from_proto("metadata.create_time", t))?;
        Ok(ArtifactMetadata {
            file_name: m.file_name.clone(),
            version: m.version,
            mime_type: m.mime_type.clone(),
            size_bytes: m.size_bytes,
            create_time,
            custom_metadata: map_from_struct("metadata.custom_metadata", m.custom_metadata.as_ref())?,
            is_text: m.is_text,
            is_file_uri: m.is_file_uri,
            display_name: m.display_name.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::artifact::{DEFAULT_CHUNK_BYTES, MAX_CHUNK_BYTES};
    use serde_json::json;

    fn at() -> Option<pb::ArtifactRef> {
        Some(artifact_ref("a", "u", "s", "user:f.txt"))
    }

    #[test]
    fn a_unary_save_keeps_its_part_and_metadata() {
        let saved = SaveWithMetadata::try_from(pb::SaveArtifactRequest {
            r#ref: at(),
            part: Some(pb::Part::from(&Part::text_part("hello"))),
            version: Some(3),
            custom_metadata: Some(map_to_struct([("k".to_string(), json!(1))].iter().map(|(k, v)| (k, v)))),
        })
        .unwrap();
        assert_eq!(saved.save.part, Part::text_part("hello"));
        assert_eq!(
            (saved.save.file_name.as_str(), saved.save.version),
            ("user:f.txt", Some(3))
        );
        assert_eq!(saved.custom_metadata.get("k"), Some(&json!(1)));
        let back = pb::SaveArtifactRequest::from(&saved.save);
        assert_eq!(back.r#ref, at());
        assert_eq!(back.version, Some(3));
    }

    #[test]
    fn requests_round_trip() {
        let load = LoadRequest::try_from(pb::LoadArtifactRequest {
            r#ref: at(),
            version: Some(2),
        })
        .unwrap();
        assert_eq!(
            LoadRequest::try_from(pb::GetArtifactMetadataRequest::from(&load)).unwrap(),
            load
        );
        assert_eq!(
            LoadRequest::try_from(pb::LoadArtifactRequest::from(&load)).unwrap(),
            load
        );
        let delete = DeleteRequest::try_from(pb::DeleteArtifactRequest {
            r#ref: at(),
            version: None,
        })
        .unwrap();
        assert_eq!(
            DeleteRequest::try_from(pb::DeleteArtifactRequest::from(&delete)).unwrap(),
            delete
        );
        let versions = VersionsRequest::try_from(pb::ListVersionsRequest { r#ref: at() }).unwrap();
        assert_eq!(
            VersionsRequest::try_from(pb::ListVersionsRequest::from(&versions)).unwrap(),
            versions
        );
        let list = ListRequest::from(pb::ListArtifactsRequest {
            app_name: "a".into(),
            user_id: "u".into(),
            session_id: String::new(),
        });
        assert_eq!(ListRequest::from(pb::ListArtifactsRequest::from(&list)), list);
        let upload = UploadRequest {
            app_name: "a".into(),
            user_id: "u".into(),
            session_id: "s".into(),
            file_name: "f".into(),
            mime_type: "x/y".into(),
            is_text: true,
            version: Some(4),
            custom_metadata: [("k".to_string(), json!("v"))].into(),
            size_hint: Some(9),
            display_name: Some("notes".into()),
            ..Default::default()
        };
        assert_eq!(
            UploadRequest::try_from(pb::UploadHeader::from(&upload)).unwrap(),
            upload
        );
    }

    #[test]
    fn missing_pieces_name_the_field() {
        let no_ref = pb::LoadArtifactRequest {
            r#ref: None,
            version: None,
        };
        assert!(
            LoadRequest::try_from(no_ref)
                .unwrap_err()
                .to_string()
                .contains("ref is required")
        );
        let no_part = pb::SaveArtifactRequest {
            r#ref: at(),
            ..Default::default()
        };
        assert!(
            SaveWithMetadata::try_from(no_part)
                .unwrap_err()
                .to_string()
                .contains("part is required")
        );
        let no_header_ref = pb::UploadHeader::default();
        assert!(
            UploadRequest::try_from(no_header_ref)
                .unwrap_err()
                .to_string()
                .contains("ref is required")
        );
    }

    #[test]
    fn metadata_round_trips() {
        let m = ArtifactMetadata {
            file_name: "f".into(),
            version: 2,
            mime_type: "image/png".into(),
            size_bytes: 10,
            create_time: chrono::Utc::now(),
            custom_metadata: [("k".to_string(), json!([1, "x"]))].into(),
            is_text: false,
            is_file_uri: false,
            display_name: Some("chart.png".into()),
        };
        assert_eq!(ArtifactMetadata::try_from(&pb::ArtifactMetadata::from(&m)).unwrap(), m);
    }

    #[test]
    fn download_chunk_sizes_are_bounded() {
        let req = |chunk_size| pb::DownloadArtifactRequest {
            r#ref: at(),
            version: None,
            chunk_size,
        };
        let size = |chunk_size| DownloadRequest::try_from(req(chunk_size)).unwrap().chunk_bytes;
        assert_eq!(size(0), DEFAULT_CHUNK_BYTES);
        assert_eq!(size(100), 100);
        assert_eq!(size(u32::MAX), MAX_CHUNK_BYTES);
    }
}

//! Arbitrary bytes decoded as each request message, then converted to core and
//! validated, as the servers do: nothing may panic, whatever the bytes.
#![no_main]

use adk_grpc_core::artifact as art;
use adk_grpc_core::session::{
    AppendEventRequest, CreateRequest, DeleteRequest, GetRequest, ListEventsRequest, ListRequest, WatchRequest,
};
use adk_grpc_proto::v1 as pb;
use libfuzzer_sys::fuzz_target;
use prost::Message;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, bytes)) = data.split_first() else {
        return;
    };
    match selector % 16 {
        0 => decode(bytes, |r: pb::CreateSessionRequest| {
            CreateRequest::try_from(r).map(|r| r.validate().is_ok())
        }),
        1 => decode(bytes, |r: pb::GetSessionRequest| {
            GetRequest::try_from(r).map(|r| r.validate().is_ok())
        }),
        2 => decode(bytes, |r: pb::ListSessionsRequest| {
            ListRequest::try_from(r).map(|r| r.validate().is_ok())
        }),
        3 => decode(bytes, |r: pb::DeleteSessionRequest| {
            Ok(DeleteRequest::from(r).validate().is_ok())
        }),
        4 => decode(bytes, |r: pb::AppendEventRequest| {
            AppendEventRequest::try_from(r).map(|r| r.validate().is_ok())
        }),
        5 => decode(bytes, |r: pb::ListEventsRequest| {
            ListEventsRequest::try_from(r).map(|r| r.validate().is_ok())
        }),
        6 => decode(bytes, |r: pb::WatchSessionRequest| {
            Ok(WatchRequest::from(r).validate().is_ok())
        }),
        7 => decode(bytes, |r: pb::SaveArtifactRequest| {
            art::SaveWithMetadata::try_from(r).and_then(|r| art::UploadRequest::for_part(&r.save, r.custom_metadata))
                .map(|(r, _)| r.validate().is_ok())
        }),
        8 => decode(bytes, |r: pb::UploadHeader| {
            art::UploadRequest::try_from(r).map(|r| r.validate().is_ok())
        }),
        9 => decode(bytes, |r: pb::LoadArtifactRequest| {
            art::LoadRequest::try_from(r).map(|r| r.validate().is_ok())
        }),
        10 => decode(bytes, |r: pb::GetArtifactMetadataRequest| {
            art::LoadRequest::try_from(r).map(|r| r.validate().is_ok())
        }),
        11 => decode(bytes, |r: pb::DownloadArtifactRequest| {
            art::DownloadRequest::try_from(r).map(|r| r.load.validate().is_ok())
        }),
        12 => decode(bytes, |r: pb::DeleteArtifactRequest| {
            art::DeleteRequest::try_from(r).map(|r| r.validate().is_ok())
        }),
        13 => decode(bytes, |r: pb::ListArtifactsRequest| {
            Ok(art::ListRequest::from(r).validate().is_ok())
        }),
        14 => decode(bytes, |r: pb::ListVersionsRequest| {
            art::VersionsRequest::try_from(r).map(|r| r.validate().is_ok())
        }),
        _ => decode(bytes, |e: pb::Event| {
            // The whole event path: proto -> core -> proto -> core must agree.
            adk_grpc_core::Event::try_from(&e).map(|core| {
                let again =
                    adk_grpc_core::Event::try_from(&pb::Event::from(&core)).expect("a converted event converts back");
                assert_eq!(core.id, again.id);
                adk_grpc_core::validate::event_limits(&core).is_ok()
            })
        }),
    }
});

fn decode<M: Message + Default>(bytes: &[u8], check: impl FnOnce(M) -> adk_grpc_core::Result<bool>) {
    if let Ok(message) = M::decode(bytes) {
        let _ = check(message);
    }
}

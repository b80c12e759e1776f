//! The ACL admin requests (`AdminBrokerProcessor`): UPDATE_AND_CREATE_ACL_CONFIG,
//! DELETE_ACL_CONFIG, UPDATE_GLOBAL_WHITE_ADDRS_CONFIG and GET_BROKER_CLUSTER_ACL_INFO.

use crate::broker::reply::{error, Response};
use crate::broker::state::BrokerState;
use crate::remoting::{RemotingCommand, RequestCode, ResponseCode};

/// The ACL admin requests (50–53: UPDATE_AND_CREATE_ACL_CONFIG, DELETE_ACL_CONFIG,
/// GET_BROKER_CLUSTER_ACL_INFO, UPDATE_GLOBAL_WHITE_ADDRS_CONFIG), as Java's
/// `AdminBrokerProcessor` answers them: the change written to the ACL files and in force at
/// once, or the request's failure code (209, 210, 211) with the reason. Without `aclEnable`
/// Java fails on a missing validator (a null remark, or SYSTEM_ERROR for 52); ferromq says so.
pub fn acl_admin(state: &BrokerState, request: &RemotingCommand) -> Response {
    use crate::broker::acl::AclChange;
    use crate::remoting::headers::{
        CreateAccessConfigRequestHeader, DeleteAccessConfigRequestHeader,
        GetBrokerAclConfigResponseHeader, UpdateGlobalWhiteAddrsConfigRequestHeader,
    };
    let code = request.request_code();
    let failure = ResponseCode(match code {
        RequestCode::UPDATE_AND_CREATE_ACL_CONFIG => 209,
        RequestCode::DELETE_ACL_CONFIG => 210,
        RequestCode::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG => 211,
        _ => ResponseCode::SYSTEM_ERROR.0,
    });
    let Some(rules) = &state.acl else {
        return error(request, failure, "aclEnable is false on this broker");
    };
    let split = |list: Option<String>| {
        list.map(|l| {
            l.split(',')
                .map(str::trim)
                .filter(|e| !e.is_empty())
                .map(str::to_owned)
                .collect()
        })
    };
    let change = match code {
        RequestCode::UPDATE_AND_CREATE_ACL_CONFIG => {
            match request.decode_header::<CreateAccessConfigRequestHeader>() {
                Ok(h) => AclChange::Upsert {
                    access_key: h.access_key,
                    secret_key: h.secret_key,
                    white_remote_address: h.white_remote_address,
                    admin: h.admin.unwrap_or(false),
                    default_topic_perm: h.default_topic_perm,
                    default_group_perm: h.default_group_perm,
                    topic_perms: split(h.topic_perms),
                    group_perms: split(h.group_perms),
                },
                Err(e) => return error(request, failure, e.to_string()),
            }
        }
        RequestCode::DELETE_ACL_CONFIG => {
            match request.decode_header::<DeleteAccessConfigRequestHeader>() {
                Ok(h) => AclChange::Delete {
                    access_key: h.access_key,
                },
                Err(e) => return error(request, failure, e.to_string()),
            }
        }
        RequestCode::UPDATE_GLOBAL_WHITE_ADDRS_CONFIG => {
            match request.decode_header::<UpdateGlobalWhiteAddrsConfigRequestHeader>() {
                Ok(h) => AclChange::GlobalWhite {
                    addresses: split(Some(h.global_white_addrs)).unwrap_or_default(),
                    file: h
                        .acl_file_full_path
                        .filter(|p| !p.is_empty())
                        .map(std::path::PathBuf::from),
                },
                Err(e) => return error(request, failure, e.to_string()),
            }
        }
        _ => {
            let (version, all) = rules.versions();
            let mut response = RemotingCommand::success_to(request);
            response.set_header(&GetBrokerAclConfigResponseHeader {
                version,
                all_acl_file_version: Some(all),
                broker_name: state.config.broker_name.clone(),
                broker_addr: format!("{}:{}", state.config.broker_ip1, state.listen_port()),
                cluster_name: state.config.broker_cluster_name.clone(),
            });
            return Some(response);
        }
    };
    match rules.change(&change) {
        Ok(()) => Some(RemotingCommand::success_to(request)),
        Err(reason) => {
            tracing::warn!(%reason, code = code.0, "ACL change refused");
            error(request, failure, reason)
        }
    }
}

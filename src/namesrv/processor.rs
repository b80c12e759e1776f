//! The name server's request processor (`DefaultRequestProcessor` and
//! `ClientRequestProcessor` in Java): one request in, at most one response out.
//!
//! Runs on the control shard, which owns the [`RouteInfoManager`] and [`KvConfigManager`].
//! Pure over its state: no I/O here; KV persistence is reported back to the caller through
//! [`Outcome::kv_changed`]. Codes and remarks follow `reference/namesrv.md` §4–§7 and
//! `reference/remoting.md` §6.

use super::kv_config::{KvConfigManager, NAMESPACE_ORDER_TOPIC_CONFIG};
use super::route_info::{Registration, RouteInfoManager};
use super::route_snapshot::{RouteSnapshot, SharedRouteSnapshot};
use crate::config::namesrv::NamesrvConfig;
use crate::remoting::body::{
    DataVersion, JsonFlavour, KvTable, RegisterBrokerBody, TopicList, TopicRouteData,
};
use crate::remoting::headers::{
    AddWritePermOfBrokerRequestHeader, AddWritePermOfBrokerResponseHeader,
    BrokerHeartbeatRequestHeader, DeleteKvConfigRequestHeader, DeleteTopicFromNamesrvRequestHeader,
    GetBrokerMemberGroupRequestHeader, GetKvConfigRequestHeader, GetKvConfigResponseHeader,
    GetKvListByNamespaceRequestHeader, GetTopicsByClusterRequestHeader, PutKvConfigRequestHeader,
    QueryDataVersionRequestHeader, QueryDataVersionResponseHeader, RegisterBrokerRequestHeader,
    RegisterBrokerResponseHeader, RegisterTopicRequestHeader, UnregisterBrokerRequestHeader,
    WipeWritePermOfBrokerRequestHeader, WipeWritePermOfBrokerResponseHeader,
};
use crate::remoting::server::ConnectionId;
use crate::remoting::{CommandHeader, HeaderError, RemotingCommand, RequestCode, ResponseCode};

/// The request version from which routes use standard JSON (`MQVersion.Version.V4_9_4`).
pub const STANDARD_JSON_ROUTE_VERSION: i32 = 401;

/// `TopicSysFlag` bits used by the unit topic lists.
const FLAG_UNIT: i32 = 0x1;
const FLAG_UNIT_SUB: i32 = 0x2;

/// What processing one request produced.
#[derive(Debug)]
pub struct Outcome {
    /// The response, `None` for requests that get none.
    pub response: Option<RemotingCommand>,
    /// The KV store changed and should be persisted.
    pub kv_changed: bool,
}

/// The name server's state and its request processing.
#[derive(Debug)]
pub struct NamesrvProcessor {
    /// Route tables.
    pub routes: RouteInfoManager,
    /// KV store.
    pub kv: KvConfigManager,
    /// Settings, as GET_NAMESRV_CONFIG shows them and UPDATE_NAMESRV_CONFIG changes them.
    config: NamesrvConfig,
    /// Encoded routes for readers on every shard; republished after each change.
    snapshot: SharedRouteSnapshot,
}

/// A request that cannot be processed, with the code and remark Java would answer.
struct Refusal {
    code: ResponseCode,
    remark: String,
}

impl From<HeaderError> for Refusal {
    fn from(error: HeaderError) -> Self {
        Refusal {
            code: ResponseCode::SYSTEM_ERROR,
            remark: error.to_string(),
        }
    }
}

type Processed = Result<(RemotingCommand, bool), Refusal>;

impl NamesrvProcessor {
    /// A processor with the given stores.
    #[must_use]
    pub fn new(
        config: &NamesrvConfig,
        kv: KvConfigManager,
        snapshot: SharedRouteSnapshot,
    ) -> NamesrvProcessor {
        let timeout_ms =
            u64::try_from(config.broker_expired_timeout.as_millis()).unwrap_or(u64::MAX);
        NamesrvProcessor {
            routes: RouteInfoManager::new(timeout_ms),
            kv,
            config: config.clone(),
            snapshot,
        }
    }

    /// Rebuilds and publishes the route snapshot; called after every change to routes, the
    /// order-topic KV namespace or `orderMessageEnable`.
    pub fn publish_routes(&self) {
        let snapshot =
            RouteSnapshot::build(&self.routes, &self.kv, self.config.order_message_enable);
        self.snapshot.store(std::sync::Arc::new(snapshot));
    }

    /// Drops brokers registered on a closed connection, republishing routes if any went.
    pub fn on_channel_destroy(&mut self, channel: ConnectionId) {
        if self.routes.on_channel_destroy(channel) > 0 {
            self.publish_routes();
        }
    }

    /// Drops brokers silent past their timeout, republishing routes if any went.
    pub fn scan_not_active_broker(&mut self, now_ms: u64) {
        if !self.routes.scan_not_active_broker(now_ms).is_empty() {
            self.publish_routes();
        }
    }

    /// Processes one request that arrived on `channel` at `now_ms`.
    pub fn process(
        &mut self,
        channel: ConnectionId,
        request: &RemotingCommand,
        now_ms: u64,
    ) -> Outcome {
        let processed = match request.request_code() {
            RequestCode::PUT_KV_CONFIG => self.put_kv_config(request),
            RequestCode::GET_KV_CONFIG => self.get_kv_config(request),
            RequestCode::DELETE_KV_CONFIG => self.delete_kv_config(request),
            RequestCode::GET_KVLIST_BY_NAMESPACE => self.get_kv_list(request),
            RequestCode::QUERY_DATA_VERSION => self.query_data_version(request, now_ms),
            RequestCode::REGISTER_BROKER => self.register_broker(request, channel, now_ms),
            RequestCode::UNREGISTER_BROKER => self.unregister_broker(request),
            RequestCode::BROKER_HEARTBEAT => self.broker_heartbeat(request, now_ms),
            RequestCode::GET_BROKER_MEMBER_GROUP => self.broker_member_group(request),
            RequestCode::GET_ROUTEINFO_BY_TOPIC => {
                Ok((self.snapshot.load().answer(request), false))
            }
            RequestCode::GET_BROKER_CLUSTER_INFO => Ok((
                success_with_body(request, self.routes.cluster_info().to_json()),
                false,
            )),
            RequestCode::WIPE_WRITE_PERM_OF_BROKER => self.set_write_perm(request, true),
            RequestCode::ADD_WRITE_PERM_OF_BROKER => self.set_write_perm(request, false),
            RequestCode::GET_ALL_TOPIC_LIST_FROM_NAMESERVER => self.all_topic_list(request),
            RequestCode::DELETE_TOPIC_IN_NAMESRV => self.delete_topic(request),
            RequestCode::REGISTER_TOPIC_IN_NAMESRV => self.register_topic(request),
            RequestCode::GET_TOPICS_BY_CLUSTER => self.topics_by_cluster(request),
            RequestCode::GET_SYSTEM_TOPIC_LIST_FROM_NS => {
                let (topics, addr) = self.routes.system_topic_list();
                Ok((topic_list(request, topics, addr), false))
            }
            RequestCode::GET_UNIT_TOPIC_LIST => Ok((
                topic_list(
                    request,
                    self.routes.topics_with_sys_flag(FLAG_UNIT, 0),
                    None,
                ),
                false,
            )),
            RequestCode::GET_HAS_UNIT_SUB_TOPIC_LIST => {
                let topics = self.routes.topics_with_sys_flag(FLAG_UNIT_SUB, 0);
                Ok((topic_list(request, topics, None), false))
            }
            RequestCode::GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST => {
                let topics = self.routes.topics_with_sys_flag(FLAG_UNIT_SUB, FLAG_UNIT);
                Ok((topic_list(request, topics, None), false))
            }
            RequestCode::UPDATE_NAMESRV_CONFIG => self.update_config(request),
            RequestCode::GET_NAMESRV_CONFIG => {
                let text = self.config.to_properties().into_bytes();
                Ok((success_with_body(request, text), false))
            }
            code => Err(Refusal {
                code: ResponseCode::REQUEST_CODE_NOT_SUPPORTED,
                remark: format!(" request type {} not supported", code.0),
            }),
        };
        let changes_routes = matches!(
            request.request_code(),
            RequestCode::REGISTER_BROKER
                | RequestCode::UNREGISTER_BROKER
                | RequestCode::WIPE_WRITE_PERM_OF_BROKER
                | RequestCode::ADD_WRITE_PERM_OF_BROKER
                | RequestCode::DELETE_TOPIC_IN_NAMESRV
                | RequestCode::REGISTER_TOPIC_IN_NAMESRV
                | RequestCode::PUT_KV_CONFIG
                | RequestCode::DELETE_KV_CONFIG
                | RequestCode::UPDATE_NAMESRV_CONFIG
        );
        if changes_routes && processed.is_ok() {
            // Before the response leaves: nobody may read an older route after it.
            self.publish_routes();
        }
        match processed {
            Ok((response, kv_changed)) => Outcome {
                response: Some(response),
                kv_changed,
            },
            Err(refusal) => {
                tracing::debug!(code = request.code, remark = %refusal.remark, "request refused");
                Outcome {
                    response: Some(RemotingCommand::response_to(
                        request,
                        refusal.code,
                        Some(refusal.remark),
                    )),
                    kv_changed: false,
                }
            }
        }
    }

    /// UPDATE_NAMESRV_CONFIG: applies properties text to the live settings. Settings that
    /// shape the running server (listen address, shards, limits) are recorded but take effect
    /// at the next start, as in Java.
    fn update_config(&mut self, request: &RemotingCommand) -> Processed {
        let Ok(text) = std::str::from_utf8(&request.body) else {
            return Err(Refusal {
                code: ResponseCode::SYSTEM_ERROR,
                remark: "string2Properties error".into(),
            });
        };
        let properties = crate::config::properties::parse(text);
        if properties
            .iter()
            .any(|p| self.config.is_black_listed(&p.key))
        {
            return Err(Refusal {
                code: ResponseCode::NO_PERMISSION,
                remark: "Can not update config in black list.".into(),
            });
        }
        let mut updated = self.config.clone();
        match updated.apply("UPDATE_NAMESRV_CONFIG", &properties) {
            Ok(unknown) => {
                for key in unknown {
                    tracing::warn!(%key, "UPDATE_NAMESRV_CONFIG: unknown key ignored");
                }
                tracing::info!(config = %text.trim(), "name server config updated");
                self.config = updated;
                Ok((RemotingCommand::success_to(request), false))
            }
            Err(error) => Err(Refusal {
                code: ResponseCode::SYSTEM_ERROR,
                remark: error.to_string(),
            }),
        }
    }

    fn put_kv_config(&mut self, request: &RemotingCommand) -> Processed {
        let header: PutKvConfigRequestHeader = request.decode_header()?;
        let changed = self.kv.put(&header.namespace, &header.key, &header.value);
        Ok((RemotingCommand::success_to(request), changed))
    }

    fn get_kv_config(&mut self, request: &RemotingCommand) -> Processed {
        let header: GetKvConfigRequestHeader = request.decode_header()?;
        match self.kv.get(&header.namespace, &header.key) {
            Some(value) => {
                let response_header = GetKvConfigResponseHeader {
                    value: Some(value.to_owned()),
                };
                Ok((success_with_header(request, &response_header), false))
            }
            None => Err(Refusal {
                code: ResponseCode::QUERY_NOT_FOUND,
                remark: format!(
                    "No config item, Namespace: {} Key: {}",
                    header.namespace, header.key
                ),
            }),
        }
    }

    fn delete_kv_config(&mut self, request: &RemotingCommand) -> Processed {
        let header: DeleteKvConfigRequestHeader = request.decode_header()?;
        let changed = self.kv.delete(&header.namespace, &header.key);
        Ok((RemotingCommand::success_to(request), changed))
    }

    fn get_kv_list(&mut self, request: &RemotingCommand) -> Processed {
        let header: GetKvListByNamespaceRequestHeader = request.decode_header()?;
        match self.kv.list(&header.namespace) {
            Some(entries) => {
                let table = KvTable {
                    table: entries.clone(),
                };
                Ok((success_with_body(request, to_json(&table)), false))
            }
            None => Err(Refusal {
                code: ResponseCode::QUERY_NOT_FOUND,
                remark: format!("No config item, Namespace: {}", header.namespace),
            }),
        }
    }

    fn query_data_version(&mut self, request: &RemotingCommand, now_ms: u64) -> Processed {
        let header: QueryDataVersionRequestHeader = request.decode_header()?;
        let theirs: DataVersion = serde_json::from_slice(&request.body).unwrap_or_default();
        let ours = self
            .routes
            .data_version(&header.cluster_name, &header.broker_addr);
        let changed = ours != Some(theirs);
        self.routes
            .refresh(&header.cluster_name, &header.broker_addr, now_ms);
        let mut response = success_with_header(
            request,
            &QueryDataVersionResponseHeader {
                changed: Some(changed),
            },
        );
        if let Some(ours) = ours {
            response.body = to_json(&ours);
        }
        Ok((response, false))
    }

    fn register_broker(
        &mut self,
        request: &RemotingCommand,
        channel: ConnectionId,
        now_ms: u64,
    ) -> Processed {
        let header: RegisterBrokerRequestHeader = request.decode_header()?;
        let expected_crc = header.body_crc32.unwrap_or(0);
        if expected_crc != 0 {
            let crc = crate::bytes::java_crc32(&request.body);
            if crc != expected_crc {
                return Err(Refusal {
                    code: ResponseCode::SYSTEM_ERROR,
                    remark: "crc32 not match".into(),
                });
            }
        }
        let compressed = header.compressed.unwrap_or(false);
        let body = RegisterBrokerBody::decode(&request.body, compressed, request.version).map_err(
            |error| Refusal {
                code: ResponseCode::SYSTEM_ERROR,
                remark: format!("register broker body: {error}"),
            },
        )?;
        let registration = Registration {
            cluster: header.cluster_name,
            broker_addr: header.broker_addr,
            broker_name: header.broker_name,
            broker_id: header.broker_id,
            ha_server_addr: header.ha_server_addr,
            zone_name: request.ext("__ZONE_NAME").map(str::to_owned),
            timeout_ms: header
                .heartbeat_timeout_millis
                .and_then(|ms| u64::try_from(ms).ok()),
            enable_acting_master: header.enable_acting_master.unwrap_or(false),
            body,
            channel: Some(channel),
        };
        let result = self.routes.register_broker(registration, now_ms);
        let response_header = RegisterBrokerResponseHeader {
            ha_server_addr: result.ha_server_addr,
            master_addr: result.master_addr,
        };
        let mut response = success_with_header(request, &response_header);
        if self.config.return_order_topic_config_to_broker {
            if let Some(entries) = self.kv.list(NAMESPACE_ORDER_TOPIC_CONFIG) {
                response.body = to_json(&KvTable {
                    table: entries.clone(),
                });
            }
        }
        Ok((response, false))
    }

    fn unregister_broker(&mut self, request: &RemotingCommand) -> Processed {
        let header: UnregisterBrokerRequestHeader = request.decode_header()?;
        self.routes.unregister_broker(
            &header.cluster_name,
            &header.broker_addr,
            &header.broker_name,
            header.broker_id,
        );
        Ok((RemotingCommand::success_to(request), false))
    }

    fn broker_heartbeat(&mut self, request: &RemotingCommand, now_ms: u64) -> Processed {
        let header: BrokerHeartbeatRequestHeader = request.decode_header()?;
        self.routes
            .refresh(&header.cluster_name, &header.broker_addr, now_ms);
        Ok((RemotingCommand::success_to(request), false))
    }

    fn broker_member_group(&mut self, request: &RemotingCommand) -> Processed {
        let header: GetBrokerMemberGroupRequestHeader = request.decode_header()?;
        let addrs = self
            .routes
            .broker_member_group(&header.cluster_name, &header.broker_name);
        let addrs: serde_json::Map<String, serde_json::Value> = addrs
            .into_iter()
            .map(|(id, addr)| (id.to_string(), addr.into()))
            .collect();
        let body = serde_json::json!({
            "brokerAddrs": addrs,
            "brokerName": header.broker_name,
            "cluster": header.cluster_name,
        });
        Ok((
            success_with_body(request, body.to_string().into_bytes()),
            false,
        ))
    }

    fn set_write_perm(&mut self, request: &RemotingCommand, wipe: bool) -> Processed {
        let response = if wipe {
            let header: WipeWritePermOfBrokerRequestHeader = request.decode_header()?;
            let count = self.routes.set_write_perm(&header.broker_name, true);
            tracing::info!(broker = %header.broker_name, count, "wiped write perm");
            success_with_header(
                request,
                &WipeWritePermOfBrokerResponseHeader {
                    wipe_topic_count: count,
                },
            )
        } else {
            let header: AddWritePermOfBrokerRequestHeader = request.decode_header()?;
            let count = self.routes.set_write_perm(&header.broker_name, false);
            tracing::info!(broker = %header.broker_name, count, "added write perm");
            success_with_header(
                request,
                &AddWritePermOfBrokerResponseHeader {
                    add_topic_count: count,
                },
            )
        };
        Ok((response, false))
    }

    fn all_topic_list(&mut self, request: &RemotingCommand) -> Processed {
        if !self.config.enable_all_topic_list {
            return Err(Refusal {
                code: ResponseCode::SYSTEM_ERROR,
                remark: "disable".into(),
            });
        }
        Ok((topic_list(request, self.routes.all_topics(), None), false))
    }

    fn delete_topic(&mut self, request: &RemotingCommand) -> Processed {
        let header: DeleteTopicFromNamesrvRequestHeader = request.decode_header()?;
        self.routes
            .delete_topic(&header.topic, header.cluster_name.as_deref());
        Ok((RemotingCommand::success_to(request), false))
    }

    fn register_topic(&mut self, request: &RemotingCommand) -> Processed {
        let header: RegisterTopicRequestHeader = request.decode_header()?;
        if !request.body.is_empty() {
            let route: TopicRouteData =
                serde_json::from_slice(&request.body).map_err(|error| Refusal {
                    code: ResponseCode::SYSTEM_ERROR,
                    remark: format!("bad TopicRouteData body: {error}"),
                })?;
            self.routes.register_topic(&header.topic, route.queue_datas);
        }
        Ok((RemotingCommand::success_to(request), false))
    }

    fn topics_by_cluster(&mut self, request: &RemotingCommand) -> Processed {
        let header: GetTopicsByClusterRequestHeader = request.decode_header()?;
        Ok((
            topic_list(
                request,
                self.routes.topics_by_cluster(&header.cluster),
                None,
            ),
            false,
        ))
    }
}

/// Which JSON flavour a route request gets (`reference/remoting.md` §10.3).
#[must_use]
pub fn route_flavour(request_version: i32, accept_standard_json_only: Option<bool>) -> JsonFlavour {
    if request_version >= STANDARD_JSON_ROUTE_VERSION || accept_standard_json_only == Some(true) {
        JsonFlavour::Standard
    } else {
        JsonFlavour::Fastjson
    }
}

fn success_with_body(request: &RemotingCommand, body: Vec<u8>) -> RemotingCommand {
    RemotingCommand::success_to(request).with_body(body)
}

fn success_with_header(request: &RemotingCommand, header: &impl CommandHeader) -> RemotingCommand {
    let mut response = RemotingCommand::success_to(request);
    response.set_header(header);
    response
}

fn topic_list(
    request: &RemotingCommand,
    topics: Vec<String>,
    addr: Option<String>,
) -> RemotingCommand {
    let list = TopicList {
        broker_addr: addr,
        topic_list: topics,
    };
    success_with_body(request, to_json(&list))
}

fn to_json(value: &impl serde::Serialize) -> Vec<u8> {
    serde_json::to_vec(value).expect("plain data serializes")
}

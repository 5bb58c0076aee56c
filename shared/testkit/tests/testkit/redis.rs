//! Proves the Redis fixtures against the real `redis-server` / `redis-cli`.

use adk_grpc_testkit::{RedisCluster, RedisServer, redis_cli};

async fn get(server: &RedisServer, key: &str) -> Option<String> {
    let mut connection = server.connection().await;
    redis::cmd("GET")
        .arg(key)
        .query_async(&mut connection)
        .await
        .expect("GET")
}

async fn set(server: &RedisServer, key: &str, value: &str) {
    let mut connection = server.connection().await;
    redis::cmd("SET")
        .arg(key)
        .arg(value)
        .query_async::<()>(&mut connection)
        .await
        .expect("SET");
}

#[tokio::test]
async fn redis_server_serves_set_and_get() {
    let server = RedisServer::start().await;
    assert_eq!(server.url(), format!("redis://127.0.0.1:{}", server.port()));

    set(&server, "greeting", "hello").await;
    assert_eq!(get(&server, "greeting").await.as_deref(), Some("hello"));

    let port = server.port().to_string();
    assert_eq!(redis_cli(&["-p", &port, "GET", "greeting"]).await, "hello");

    server.flushall().await;
    assert_eq!(get(&server, "greeting").await, None);
}

#[tokio::test]
async fn acknowledged_write_survives_kill9_and_restart() {
    let mut server = RedisServer::start().await;
    let port = server.port();
    let first_pid = server.pid();
    set(&server, "durable", "yes").await;

    server.kill9().await;
    assert!(!server.is_running());
    server.restart().await;

    assert_eq!(server.port(), port);
    assert_ne!(server.pid(), first_pid);
    assert_eq!(get(&server, "durable").await.as_deref(), Some("yes"));
}

#[tokio::test]
async fn data_survives_graceful_stop_and_restart() {
    let mut server = RedisServer::start().await;
    set(&server, "kept", "1").await;
    server.stop().await;
    assert!(!server.is_running());
    server.restart().await;
    assert_eq!(get(&server, "kept").await.as_deref(), Some("1"));
}

#[tokio::test]
async fn redis_cluster_routes_keys_in_different_slots() {
    let cluster = RedisCluster::start(3).await;
    let ports = cluster.ports();
    assert_eq!(ports.len(), 3);
    let expected_url = format!(
        "redis+cluster://127.0.0.1:{},127.0.0.1:{},127.0.0.1:{}",
        ports[0], ports[1], ports[2]
    );
    assert_eq!(cluster.url(), expected_url);

    // With 3 masters these keys land in slots owned by different nodes.
    let keys = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"];
    let mut slots = Vec::new();
    for key in keys {
        let slot: u16 = cluster
            .cli(&["CLUSTER", "KEYSLOT", key])
            .await
            .parse()
            .expect("KEYSLOT returns a number");
        slots.push(slot);
    }
    let spread = slots.iter().filter(|slot| **slot < 5461).count();
    assert!(
        spread > 0 && spread < keys.len(),
        "test keys should span nodes, slots: {slots:?}"
    );

    for key in keys {
        assert_eq!(cluster.cli(&["SET", key, &format!("value-{key}")]).await, "OK");
    }
    for key in keys {
        assert_eq!(cluster.cli(&["GET", key]).await, format!("value-{key}"));
    }

    // The nodes hold different subsets of the keys: the data really is sharded.
    let mut keys_per_node = Vec::new();
    for port in &ports {
        let count: usize = redis_cli(&["-p", &port.to_string(), "DBSIZE"])
            .await
            .parse()
            .expect("DBSIZE returns a number");
        keys_per_node.push(count);
    }
    assert_eq!(keys_per_node.iter().sum::<usize>(), keys.len());
    assert!(
        keys_per_node.iter().filter(|count| **count > 0).count() >= 2,
        "keys should be spread over nodes: {keys_per_node:?}"
    );
}

#[tokio::test]
async fn redis_cluster_works_with_the_redis_cluster_client() {
    use redis::AsyncCommands;

    let cluster = RedisCluster::start(3).await;
    let client = redis::cluster::ClusterClient::new(cluster.node_urls()).expect("cluster client");
    let mut connection = client.get_async_connection().await.expect("cluster connection");
    for key in ["alpha", "bravo", "charlie"] {
        let () = connection.set(key, key.len()).await.expect("SET");
        let value: usize = connection.get(key).await.expect("GET");
        assert_eq!(value, key.len());
    }
}

//! `Client::quotas()` and `Client::cost()` on the local backend, for real:
//! the emulator answers Service Quotas' ListServiceQuotas (paged, at the
//! region's defaults or the values `LocalFaults::applied_quota` set) and
//! lists its MicroVMs; the report counts the sandboxes started here at
//! their image version's memory. Other tests of this binary may run
//! sandboxes on the same backend at the same time, so every assertion
//! holds whatever they add (at least ours are counted; the levels are
//! forced by quotas far below or above any use).

use rayito::quotas::{QuotaKind, QuotaLevel, QuotaWarningCode};
use rayito::{Client, CostQuery};

const MEMORY: &str = "L-CD1C0CC4";

#[tokio::test]
async fn the_local_report_counts_our_sandboxes_and_its_levels_follow_the_quota() {
    let client = Client::local().await.expect("the local backend");
    let faults = client.local_faults().unwrap();
    let sbx = client.sandbox().create().await.expect("create");

    // The defaults of the local region: every quota listed, nothing below
    // its default; the memory of our sandbox counted.
    let report = client.quotas().report().await.expect("report");
    assert_eq!(Some(report.region.as_str()), client.region());
    assert_eq!(report.entries.len(), 18);
    assert!(
        report.entries.iter().all(|e| e.value == Some(e.default)),
        "{:?}",
        report.entries
    );
    let memory_entry = report.entries.iter().find(|e| e.code == MEMORY).unwrap();
    assert_eq!(memory_entry.kind, QuotaKind::MemoryGb);
    assert_eq!(report.memory.quota_gb, memory_entry.default);
    assert!(report.memory.sandboxes >= 1, "{:?}", report.memory);
    assert!(report.memory.allocated_gb > 0.0, "{:?}", report.memory);
    assert_eq!(report.applied_rate("RunMicrovm"), Some(5.0));

    // A reduced memory quota (0.5 GB): our sandbox alone crosses the
    // critical level; the warnings say so, and that it is below the
    // default.
    faults.applied_quota(MEMORY, Some(0.5));
    let report = client.quotas().report().await.expect("report");
    assert_eq!(report.memory.quota_gb, 0.5);
    assert_eq!(report.memory.level, QuotaLevel::Critical);
    let codes: Vec<_> = report
        .warnings
        .iter()
        .filter(|w| w.quota_code == MEMORY)
        .map(|w| w.code)
        .collect();
    assert_eq!(
        codes,
        [
            QuotaWarningCode::MemoryCritical,
            QuotaWarningCode::BelowDefault
        ]
    );
    let below = report
        .warnings
        .iter()
        .find(|w| w.code == QuotaWarningCode::BelowDefault)
        .unwrap();
    assert_eq!(
        below.message,
        format!(
            "ARM_64 memory (GB): 0.5, below the default ({}); new accounts start with reduced quotas",
            memory_entry.default
        )
    );
    assert!(
        below
            .console_url
            .ends_with("/servicequotas/home/services/lambda/quotas/L-CD1C0CC4")
    );

    // A quota AWS does not list: its default is assumed, with a warning.
    faults.applied_quota(MEMORY, None);
    faults.applied_quota("L-942E56BE", Some(1e9));
    let report = client.quotas().report().await.expect("report");
    let memory_entry = report.entries.iter().find(|e| e.code == MEMORY).unwrap();
    assert_eq!(memory_entry.value, None);
    assert_eq!(report.memory.quota_gb, memory_entry.default);
    assert!(
        report
            .warnings
            .iter()
            .any(|w| w.code == QuotaWarningCode::NotListed && w.quota_code == MEMORY),
        "{:?}",
        report.warnings
    );
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["memory"]["level"], "ok");
    assert_eq!(json["warnings"][0]["code"], "not_listed");
    faults.applied_quota(MEMORY, Some(1e9));
    faults.applied_quota("L-942E56BE", Some(100.0));
    let report = client.quotas().report().await.expect("report");
    assert_eq!(report.memory.level, QuotaLevel::Ok);
    assert!(report.warnings.is_empty(), "{:?}", report.warnings);

    // The cost: on the local backend the estimate only, our running
    // sandbox priced; no bill, with the reason.
    let cost = client
        .cost()
        .report(CostQuery::new().billed(true))
        .await
        .expect("cost");
    assert_eq!(cost.billed, None);
    assert_eq!(
        cost.billed_unavailable.as_deref(),
        Some(rayito::cost::LOCAL_NOT_BILLED)
    );
    assert_eq!(cost.currency, "USD");
    let ours = cost
        .estimated
        .items
        .iter()
        .find(|i| i.sandbox_id == sbx.id())
        .expect("our sandbox is estimated");
    assert_eq!(ours.state, "RUNNING");
    assert!(ours.cost_usd.is_some_and(|c| c >= 0.0), "{ours:?}");
    let err = client.cost().billed(&CostQuery::new()).await.unwrap_err();
    assert_eq!(err.kind(), rayito::ErrorKind::Unimplemented);

    sbx.kill().await.expect("kill");
}

/// `UsageCost::billed` against moto's Cost Explorer, which answers
/// `GetCostAndUsage` from a queued result (moto's
/// `/moto-api/static/ce/cost-and-usage-results`): the MicroVMs usage types
/// summed and named, Lambda's function usage left out, the estimated
/// period making the bill partial, and a second read of the window served
/// from the instance's cache (its `fetched_at` kept) unless refreshed.
#[tokio::test]
async fn billed_cost_reads_cost_explorer_and_caches_the_window() {
    use crate::sdk_support::moto::{MotoServer, http_post};
    let Some(moto) = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .unwrap()
    else {
        return;
    };
    let group = |usage_type: &str, cost: &str, quantity: &str, unit: &str| {
        serde_json::json!({
            "Keys": [usage_type],
            "Metrics": {
                "UnblendedCost": {"Amount": cost, "Unit": "USD"},
                "UsageQuantity": {"Amount": quantity, "Unit": unit},
            }
        })
    };
    let queued = serde_json::json!({"results": [{
        "ResultsByTime": [
            {
                "TimePeriod": {"Start": "2026-11-01", "End": "2026-11-02"},
                "Total": {},
                "Groups": [
                    group("USE1-Lambda-MicroVM-vCPU-Second-ARM", "1.5", "54000", "Second"),
                    group("USE1-Lambda-GB-Second", "9", "100", "GB-Seconds"),
                ],
                "Estimated": false
            },
            {
                "TimePeriod": {"Start": "2026-11-02", "End": "2026-11-03"},
                "Total": {},
                "Groups": [
                    group("USE1-Lambda-MicroVM-vCPU-Second-ARM", "0.5", "18000", "Second"),
                    group("USE1-Lambda-MicroVM-Snapshot-Storage-GB-Hour", "0.25", "3", "GB-Hours"),
                ],
                "Estimated": true
            }
        ]
    }]});
    let (status, answer) = http_post(
        moto.port(),
        "/moto-api/static/ce/cost-and-usage-results",
        &[("Content-Type", "application/json")],
        queued.to_string().as_bytes(),
    )
    .expect("moto's API answers");
    assert!((200..300).contains(&status), "{status} {answer}");

    let config = crate::sdk_support::moto_config::sdk_config(&moto.endpoint_url(), "AKIDCOSTTEST");
    let client = Client::builder()
        .aws(rayito::AwsOptions::from_sdk_config(config))
        .build()
        .await
        .expect("client");
    let cost = client.cost();
    let query = CostQuery::new()
        .billed(true)
        .start("2026-11-01")
        .end("2026-11-03")
        .granularity(rayito::cost::Granularity::Daily);
    let billed = cost.billed(&query).await.expect("billed");
    assert_eq!(
        (billed.start.as_str(), billed.end.as_str()),
        ("2026-11-01", "2026-11-03")
    );
    let lines: Vec<_> = billed
        .lines
        .iter()
        .map(|l| {
            (
                l.usage_type.as_str(),
                l.component.as_str(),
                l.quantity,
                l.cost_usd,
            )
        })
        .collect();
    assert_eq!(
        lines,
        [
            (
                "USE1-Lambda-MicroVM-Snapshot-Storage-GB-Hour",
                "snapshot-storage",
                3.0,
                0.25
            ),
            ("USE1-Lambda-MicroVM-vCPU-Second-ARM", "vcpu", 72_000.0, 2.0),
        ]
    );
    assert_eq!(billed.total_usd, 2.25);
    assert!(billed.partial);
    assert_eq!(billed.requests, 1);

    let again = cost.clone().billed(&query).await.expect("cached");
    assert_eq!(again.fetched_at, billed.fetched_at, "served from the cache");
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    let fresh = cost
        .billed(&query.clone().refresh(true))
        .await
        .expect("refreshed");
    assert_ne!(fresh.fetched_at, billed.fetched_at, "asked again");
    assert_eq!(fresh.total_usd, 2.25);
}

/// Cost Explorer over TLS with a private CA (moto behind a TLS front): the
/// billed read trusts the client's own roots
/// (`AwsOptions::add_root_certificate_pem`) beside the system's, as every
/// other call of the backend; without that root the handshake is refused
/// and the error says so without reaching Cost Explorer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn billed_cost_over_tls_trusts_the_backends_roots() {
    use crate::sdk_support::moto::{MotoServer, http_post};
    use crate::sdk_support::tls_forward::TlsForward;
    let Some(moto) = tokio::task::spawn_blocking(MotoServer::start)
        .await
        .unwrap()
    else {
        return;
    };
    let queued = serde_json::json!({"results": [{
        "ResultsByTime": [{
            "TimePeriod": {"Start": "2026-11-01", "End": "2026-11-02"},
            "Total": {},
            "Groups": [{
                "Keys": ["USE1-Lambda-MicroVM-vCPU-Second-ARM"],
                "Metrics": {
                    "UnblendedCost": {"Amount": "1.5", "Unit": "USD"},
                    "UsageQuantity": {"Amount": "54000", "Unit": "Second"},
                }
            }],
            "Estimated": false
        }]
    }]});
    let (status, answer) = http_post(
        moto.port(),
        "/moto-api/static/ce/cost-and-usage-results",
        &[("Content-Type", "application/json")],
        queued.to_string().as_bytes(),
    )
    .expect("moto's API answers");
    assert!((200..300).contains(&status), "{status} {answer}");
    let front = TlsForward::start(moto.port()).await;
    let options = || {
        rayito::AwsOptions::from_sdk_config(crate::sdk_support::moto_config::sdk_config(
            &front.url,
            "AKIDCOSTTLS",
        ))
    };
    let query = CostQuery::new()
        .billed(true)
        .start("2026-11-01")
        .end("2026-11-02");

    let untrusting = Client::builder()
        .aws(options())
        .build()
        .await
        .expect("client");
    let err = untrusting
        .cost()
        .billed(&query)
        .await
        .expect_err("the front's CA is not trusted");
    assert_eq!(front.handshakes(), 0, "{err}");

    let trusting = Client::builder()
        .aws(options().add_root_certificate_pem(front.ca_pem.clone()))
        .build()
        .await
        .expect("client");
    let billed = trusting
        .cost()
        .billed(&query)
        .await
        .expect("billed over TLS");
    assert_eq!(billed.total_usd, 1.5);
    assert!(front.handshakes() >= 1);
}

/// The TLS-mode local backend: the report is read with the backend's own
/// trust (the emulator's CA beside the system's roots), as every other
/// call of that backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_works_on_the_local_backend_in_tls_mode() {
    let client = Client::builder()
        .local_tls()
        .build()
        .await
        .expect("the local backend in TLS mode");
    let sbx = client.sandbox().create().await.expect("create");
    let report = client.quotas().report().await.expect("report");
    assert_eq!(report.entries.len(), 18);
    assert!(report.memory.sandboxes >= 1, "{:?}", report.memory);
    assert!(sbx.kill().await.unwrap());
}

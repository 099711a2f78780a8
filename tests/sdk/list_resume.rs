//! Listing beyond one pass (issue 43): `started_after`, an order, and a
//! token that resumes a listing where it stopped, in another listing of the
//! same query; a token for other filters, or changed, is refused before
//! any page is read. Through the real AWS client against the emulator.

use crate::sdk_support;

use std::collections::BTreeSet;
use std::time::{Duration, SystemTime};

use futures_util::{StreamExt as _, TryStreamExt as _};
use rayito::{Client, ListOrder, ListQuery, Sandbox, SandboxSummary};
use rayito_emulator::{Emulator, Operation};
use sdk_support::{builder, emulator};

/// `n` running sandboxes, created one after the other (start times may
/// tie to the millisecond: the order's key then falls back to the id).
async fn sandboxes(emu: &Emulator, n: usize) -> Vec<Sandbox> {
    let mut made = Vec::new();
    for i in 0..n {
        made.push(
            builder(emu)
                .metadata([("n", i.to_string())])
                .create()
                .await
                .unwrap(),
        );
    }
    made
}

async fn client(emu: &Emulator) -> Client {
    builder(emu).client().await.unwrap()
}

/// The first `n` items of a listing of `query`, and its token then.
async fn take(
    client: &Client,
    query: ListQuery,
    n: usize,
) -> (Vec<SandboxSummary>, Option<String>) {
    let mut list = client.list(query);
    let mut items = Vec::new();
    while items.len() < n {
        items.push(list.next().await.expect("an item").unwrap());
    }
    (items, list.next_token())
}

fn ids(items: &[SandboxSummary]) -> Vec<String> {
    items.iter().map(|s| s.sandbox_id.clone()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_resumes_from_its_token_with_nothing_repeated_or_lost() {
    let emu = emulator().await;
    let made = sandboxes(&emu, 5).await;
    let all: BTreeSet<String> = made.iter().map(|s| s.id().to_owned()).collect();
    let client = client(&emu).await;
    let query = || ListQuery::new().page_size(2);

    // Stopped mid-page (the third item is the first of the second page),
    // on a page's end, and after the first item.
    for stop in [3, 2, 1, 4] {
        let (first, token) = take(&client, query(), stop).await;
        let token = token.expect("a token while items are left");
        let debug = format!("{:?}", query().next_token(token.clone()));
        assert!(!debug.contains(&token), "{debug}");
        let rest: Vec<SandboxSummary> = client
            .list(query().next_token(token.clone()))
            .try_collect()
            .await
            .unwrap();
        let mut seen = ids(&first);
        seen.extend(ids(&rest));
        assert_eq!(seen.len(), 5, "stopped after {stop}: {seen:?}");
        assert_eq!(seen.iter().cloned().collect::<BTreeSet<_>>(), all);
        // A token resumes any number of times.
        let again: Vec<SandboxSummary> = client
            .list(query().next_token(token))
            .try_collect()
            .await
            .unwrap();
        assert_eq!(ids(&again), ids(&rest));
    }

    // Used up: no token.
    let mut list = client.list(query());
    let mut n = 0;
    while let Some(item) = list.next().await {
        item.unwrap();
        n += 1;
    }
    assert_eq!(n, 5);
    assert_eq!(list.next_token(), None);
    // Nothing given yet: no token either.
    assert_eq!(client.list(query()).next_token(), None);

    for sbx in made {
        assert!(sbx.kill().await.unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_order_and_started_after_hold_and_an_ordered_listing_resumes_by_key() {
    let emu = emulator().await;
    let made = sandboxes(&emu, 4).await;
    let client = client(&emu).await;

    let ascending: Vec<SandboxSummary> = client
        .list(ListQuery::new().page_size(1).order(ListOrder::Ascending))
        .try_collect()
        .await
        .unwrap();
    let key = |s: &SandboxSummary| (s.started_at.unwrap(), s.sandbox_id.clone());
    let keys: Vec<_> = ascending.iter().map(key).collect();
    let mut sorted = keys.clone();
    sorted.sort();
    assert_eq!(keys, sorted);
    assert_eq!(ascending.len(), 4);

    let descending: Vec<SandboxSummary> = client
        .list(ListQuery::new().order(ListOrder::Descending))
        .try_collect()
        .await
        .unwrap();
    let mut reversed = ids(&ascending);
    reversed.reverse();
    assert_eq!(ids(&descending), reversed);

    // Inclusive, to the millisecond: the third and every one that started
    // with it or later.
    let third_start = ascending[2].started_at.unwrap();
    let late: Vec<SandboxSummary> = client
        .list(
            ListQuery::new()
                .started_after(third_start)
                .order(ListOrder::Ascending),
        )
        .try_collect()
        .await
        .unwrap();
    let expected: Vec<SandboxSummary> = ascending
        .iter()
        .filter(|s| s.started_at.unwrap() >= third_start)
        .cloned()
        .collect();
    assert!(ids(&late).contains(&ascending[2].sandbox_id));
    assert_eq!(ids(&late), ids(&expected));
    let none: Vec<SandboxSummary> = client
        .list(ListQuery::new().started_after(SystemTime::now() + Duration::from_secs(60)))
        .try_collect()
        .await
        .unwrap();
    assert!(none.is_empty());

    let query = || ListQuery::new().page_size(1).order(ListOrder::Descending);
    let (first, token) = take(&client, query(), 2).await;
    let rest: Vec<SandboxSummary> = client
        .list(query().next_token(token.unwrap()))
        .try_collect()
        .await
        .unwrap();
    let mut resumed = ids(&first);
    resumed.extend(ids(&rest));
    assert_eq!(resumed, reversed);

    for sbx in made {
        assert!(sbx.kill().await.unwrap());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_for_other_filters_or_changed_is_refused_before_any_page() {
    let emu = emulator().await;
    let made = sandboxes(&emu, 3).await;
    let client = client(&emu).await;
    let (_, token) = take(&client, ListQuery::new().page_size(1), 1).await;
    let token = token.unwrap();
    let (_, ordered_token) = take(&client, ListQuery::new().order(ListOrder::Ascending), 1).await;
    let ordered_token = ordered_token.unwrap();

    let foreign = "invalid next_token: the token was made for other filters; resume with the query that handed it out";
    let invalid = "invalid next_token: the token is not one a listing handed out, or it was changed; list again without it";
    // Other filters: a metadata filter, a state, started_after.
    for query in [
        ListQuery::new().page_size(1).metadata([("n", "1")]),
        ListQuery::new()
            .page_size(1)
            .states([rayito::SandboxState::Running]),
        ListQuery::new()
            .page_size(1)
            .started_after(SystemTime::UNIX_EPOCH),
    ] {
        assert_eq!(
            refused(&client, &emu, query.next_token(token.clone())).await,
            foreign
        );
    }
    // Another order: the fingerprint covers it.
    assert_eq!(
        refused(
            &client,
            &emu,
            ListQuery::new()
                .order(ListOrder::Descending)
                .next_token(ordered_token.clone())
        )
        .await,
        foreign
    );
    // A page token with an order, a key token without one, a changed
    // token, a foreign string, an oversized one.
    let mut changed = token.clone();
    changed.push('A');
    for bad in [
        ListQuery::new()
            .order(ListOrder::Ascending)
            .next_token(token.clone()),
        ListQuery::new().next_token(ordered_token),
        ListQuery::new().page_size(1).next_token(changed),
        ListQuery::new().next_token("not a token"),
        ListQuery::new().next_token("A".repeat(8193)),
    ] {
        assert_eq!(refused(&client, &emu, bad).await, invalid);
    }

    for sbx in made {
        assert!(sbx.kill().await.unwrap());
    }
}

fn emu_calls(emu: &Emulator) -> u64 {
    emu.calls(Operation::ListMicrovms)
}

/// The message of the refusal of `query`, which reads no page and never
/// repeats the token.
async fn refused(client: &Client, emu: &Emulator, query: ListQuery) -> String {
    let before = emu_calls(emu);
    let err = client
        .list(query)
        .try_collect::<Vec<_>>()
        .await
        .unwrap_err();
    assert_eq!(emu_calls(emu), before, "no page read: {err}");
    assert!(!format!("{err} {err:?}").contains("eyJ"), "{err:?}");
    err.to_string()
}

/// docs/listing.md transcribes both refusals.
#[test]
fn the_docs_transcribe_the_token_refusals() {
    let doc = std::fs::read_to_string(sdk_support::repo_root().join("docs/listing.md")).unwrap();
    for message in [
        "invalid next_token: the token was made for other filters; resume with the query that handed it out",
        "invalid next_token: the token is not one a listing handed out, or it was changed; list again without it",
    ] {
        assert!(
            doc.contains(&format!("`{message}`")),
            "docs/listing.md lacks {message}"
        );
    }
}

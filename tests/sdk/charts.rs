//! Typed charts of `run_code` results on the local backend: a cell whose
//! value offers an `e2b/chart` document (as E2B's matplotlib extraction
//! does) comes back with the document in `ExecutionResult::chart` and
//! typed by `parsed_chart()`. This host's Python has no matplotlib, so the
//! document is the cell's own (the fixtures of every kind are
//! `src/code/chart_tests.rs`).

use crate::sdk_support;

use rayito::charts::{BarData, Chart, ChartType, Coordinate};
use sdk_support::{emulator, sandbox};

const CELL: &str = r#"
class Figure:
    def _repr_mimebundle_(self):
        return {
            "e2b/chart": {
                "type": "bar", "title": "Sales", "x_label": "quarter", "y_label": "EUR",
                "elements": [
                    {"label": "Q1", "group": "2024", "value": 10},
                    {"label": "Q2", "group": "2024", "value": 12.5},
                ],
            },
            "e2b/data": {"rows": 2},
        }

    def __repr__(self):
        return "<Figure>"

display(Figure())
Figure()
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_chart_document_comes_back_typed() {
    let emu = emulator().await;
    let sbx = sandbox(&emu).await;
    let execution = sbx.run_code(CELL).await.expect("run");
    assert_eq!(execution.error, None);
    assert_eq!(execution.results.len(), 2);
    for result in &execution.results {
        assert_eq!(result.formats(), ["text", "data", "chart"]);
        assert_eq!(result.text.as_deref(), Some("<Figure>"));
        assert_eq!(result.data.as_deref(), Some(r#"{"rows": 2}"#));
        // The raw document stays reachable.
        let raw: serde_json::Value =
            serde_json::from_str(result.chart.as_deref().expect("a chart")).unwrap();
        assert_eq!(raw["type"], "bar");
        let chart = result.parsed_chart().expect("a chart");
        assert_eq!(chart.chart_type(), ChartType::Bar);
        assert_eq!(chart.title(), Some("Sales"));
        let Chart::Bar(bar) = chart else {
            panic!("not a bar chart");
        };
        assert_eq!(bar.axes.x_label.as_deref(), Some("quarter"));
        let values: Vec<(Option<&str>, Option<Coordinate>)> = bar
            .elements
            .iter()
            .map(|BarData { label, value, .. }| (label.as_deref(), value.clone()))
            .collect();
        assert_eq!(
            values,
            [
                (Some("Q1"), Some(Coordinate::Number(10.0))),
                (Some("Q2"), Some(Coordinate::Number(12.5)))
            ]
        );
    }
    // A result without a chart has none.
    let plain = sbx.run_code("1 + 1").await.unwrap();
    assert_eq!(plain.results[0].parsed_chart(), None);
    assert!(sbx.kill().await.unwrap());
}

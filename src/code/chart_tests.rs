//! Fixtures of the `e2b/chart` documents a kernel emits (E2B's shape: the
//! fields the reference's `_charts.py` reads), one per kind, and the odd
//! documents that must parse to something rather than fail.

use super::*;

const LINE: &str = r#"{"type": "line", "title": "Growth", "x_label": "day", "y_label": "users",
  "x_unit": "d", "y_unit": null,
  "x_ticks": [0, 1.5, "2024-01-03"], "x_tick_labels": ["0", "1.5", "Jan 3"], "x_scale": "datetime",
  "y_ticks": [10, 20], "y_tick_labels": ["10", "20"], "y_scale": "log",
  "elements": [
    {"label": "a", "points": [[0, 10], [1, 12.5], ["2024-01-03", 20], [true, 1], [1], [1, 2, 3], "p", [null, 1]]},
    {"label": 7, "points": "not a list"},
    "not an element"
  ]}"#;

#[test]
fn a_line_chart_keeps_every_field_and_drops_malformed_points() {
    let Chart::Line(chart) = Chart::parse(LINE) else {
        panic!("not a line chart");
    };
    assert_eq!(chart.title.as_deref(), Some("Growth"));
    assert_eq!(chart.axes.x_label.as_deref(), Some("day"));
    assert_eq!(chart.axes.y_label.as_deref(), Some("users"));
    assert_eq!(chart.axes.x_unit.as_deref(), Some("d"));
    assert_eq!(chart.axes.y_unit, None);
    assert_eq!(
        chart.x_ticks,
        vec![
            Coordinate::Number(0.0),
            Coordinate::Number(1.5),
            Coordinate::Text("2024-01-03".to_owned())
        ]
    );
    assert_eq!(chart.x_tick_labels, vec!["0", "1.5", "Jan 3"]);
    assert_eq!(chart.x_scale, Some(ScaleType::Datetime));
    assert_eq!(chart.y_scale, Some(ScaleType::Log));
    assert_eq!(chart.elements.len(), 2, "the string element is dropped");
    assert_eq!(chart.elements[0].label.as_deref(), Some("a"));
    assert_eq!(
        chart.elements[0].points,
        vec![
            (Coordinate::Number(0.0), Coordinate::Number(10.0)),
            (Coordinate::Number(1.0), Coordinate::Number(12.5)),
            (
                Coordinate::Text("2024-01-03".to_owned()),
                Coordinate::Number(20.0)
            ),
        ],
        "a bool, a short or long pair, a string and a null are dropped"
    );
    assert_eq!(chart.elements[1].label.as_deref(), Some("7"));
    assert!(chart.elements[1].points.is_empty());
}

#[test]
fn a_scatter_chart_is_a_point_chart_and_every_scale_is_known() {
    for scale in ScaleType::ALL {
        let doc = format!(
            r#"{{"type": "scatter", "x_scale": "{}", "y_scale": "nope", "elements": [{{"points": [[1, 2]]}}]}}"#,
            scale.as_str()
        );
        let Chart::Scatter(chart) = Chart::parse(&doc) else {
            panic!("not a scatter chart: {doc}");
        };
        assert_eq!(chart.x_scale, Some(scale));
        assert_eq!(chart.y_scale, None, "an unknown scale is None");
        assert_eq!(chart.elements[0].label, None);
        assert_eq!(chart.elements[0].points.len(), 1);
    }
}

#[test]
fn bar_pie_and_box_charts() {
    let bar = r#"{"type": "bar", "title": "Sales", "x_label": "quarter", "y_label": "EUR",
      "elements": [{"label": "Q1", "group": "2024", "value": 10}, {"label": "Q2", "group": "2024", "value": "n/a"},
                   {"label": "Q3", "value": false}]}"#;
    let Chart::Bar(chart) = Chart::parse(bar) else {
        panic!("not a bar chart");
    };
    assert_eq!(chart.axes.x_label.as_deref(), Some("quarter"));
    assert_eq!(
        chart.elements,
        vec![
            BarData {
                label: Some("Q1".to_owned()),
                group: Some("2024".to_owned()),
                value: Some(Coordinate::Number(10.0)),
            },
            BarData {
                label: Some("Q2".to_owned()),
                group: Some("2024".to_owned()),
                value: Some(Coordinate::Text("n/a".to_owned())),
            },
            BarData {
                label: Some("Q3".to_owned()),
                group: None,
                value: None,
            },
        ]
    );

    let pie = r#"{"type": "pie", "title": "Share", "x_label": "ignored",
      "elements": [{"label": "a", "angle": 120.5, "radius": 1, "autopct": 33.5},
                   {"label": "b", "angle": "wide", "autopct": "66.5%"}]}"#;
    let Chart::Pie(chart) = Chart::parse(pie) else {
        panic!("not a pie chart");
    };
    assert_eq!(chart.title.as_deref(), Some("Share"));
    assert_eq!(chart.elements[0].angle, Some(120.5));
    assert_eq!(chart.elements[0].radius, Some(1.0));
    assert_eq!(chart.elements[0].autopct, Some(Coordinate::Number(33.5)));
    assert_eq!(chart.elements[1].angle, None);
    assert_eq!(
        chart.elements[1].autopct,
        Some(Coordinate::Text("66.5%".to_owned()))
    );

    let boxes = r#"{"type": "box_and_whisker", "y_label": "ms",
      "elements": [{"label": "api", "min": 1, "first_quartile": 2.5, "median": 3, "third_quartile": 4,
                    "max": 5, "outliers": [9, "x", true, 12.5]}]}"#;
    let Chart::BoxAndWhisker(chart) = Chart::parse(boxes) else {
        panic!("not a box chart");
    };
    assert_eq!(chart.axes.y_label.as_deref(), Some("ms"));
    assert_eq!(
        chart.elements,
        vec![BoxAndWhiskerData {
            label: Some("api".to_owned()),
            min: Some(1.0),
            first_quartile: Some(2.5),
            median: Some(3.0),
            third_quartile: Some(4.0),
            max: Some(5.0),
            outliers: vec![9.0, 12.5],
        }]
    );
}

#[test]
fn a_superchart_parses_each_chart_as_a_document() {
    let doc = format!(
        r#"{{"type": "superchart", "title": "Both", "elements": [{LINE}, {{"type": "pie"}}, {{"type": "radar", "title": "r"}}, 3]}}"#
    );
    let chart = Chart::parse(&doc);
    assert_eq!(chart.chart_type(), ChartType::Superchart);
    assert_eq!(chart.title(), Some("Both"));
    let Chart::Superchart(sup) = chart else {
        unreachable!()
    };
    let kinds: Vec<ChartType> = sup.elements.iter().map(Chart::chart_type).collect();
    assert_eq!(
        kinds,
        vec![ChartType::Line, ChartType::Pie, ChartType::Unknown],
        "a non-object element is dropped"
    );
    assert_eq!(sup.elements[2].title(), Some("r"));
}

#[test]
fn anything_odd_is_unknown_and_never_a_failure() {
    for doc in [
        "",
        "not json",
        "[1, 2]",
        "\"line\"",
        "null",
        "{}",
        r#"{"type": 3}"#,
        r#"{"type": "LINE"}"#,
        r#"{"type": "radar", "title": 5}"#,
    ] {
        let chart = Chart::parse(doc);
        assert_eq!(chart.chart_type(), ChartType::Unknown, "{doc}");
    }
    assert_eq!(
        Chart::parse(r#"{"type": "radar", "title": 5}"#).title(),
        Some("5")
    );
    // Mistyped fields of a known kind: the kind, with nothing in them.
    let chart = Chart::parse(r#"{"type": "line", "title": {}, "x_ticks": 3, "elements": {}}"#);
    assert_eq!(chart, Chart::Line(PointChart::default()));
    // Nesting deeper than the bound is Unknown, not a deep recursion.
    let mut doc = r#"{"type": "pie"}"#.to_owned();
    for _ in 0..20 {
        doc = format!(r#"{{"type": "superchart", "elements": [{doc}]}}"#);
    }
    let mut chart = Chart::parse(&doc);
    let mut depth = 0;
    while let Chart::Superchart(sup) = chart {
        depth += 1;
        chart = sup.elements.into_iter().next().expect("one element");
    }
    assert_eq!(depth, MAX_DEPTH);
    assert_eq!(chart.chart_type(), ChartType::Unknown);
}

#[test]
fn kinds_and_scales_spell_as_the_document() {
    let kinds = [
        ChartType::Line,
        ChartType::Scatter,
        ChartType::Bar,
        ChartType::Pie,
        ChartType::BoxAndWhisker,
        ChartType::Superchart,
        ChartType::Unknown,
    ];
    let names: Vec<&str> = kinds.iter().map(|k| k.as_str()).collect();
    assert_eq!(
        names,
        [
            "line",
            "scatter",
            "bar",
            "pie",
            "box_and_whisker",
            "superchart",
            "unknown"
        ]
    );
    let scales: Vec<&str> = ScaleType::ALL.iter().map(|s| s.as_str()).collect();
    assert_eq!(
        scales,
        [
            "linear",
            "datetime",
            "categorical",
            "log",
            "symlog",
            "logit",
            "function",
            "functionlog",
            "asinh"
        ]
    );
}

//! Typed charts of `run_code` results: the `e2b/chart` document a kernel
//! sends (E2B's shape, what its matplotlib extraction emits), parsed into
//! a [`Chart`] of its kind. No I/O.
//!
//! Parsing never fails: a missing or mistyped field is `None` or empty, a
//! malformed point or item is dropped, and a document that is not a JSON
//! object, has an unknown `type`, or nests charts too deeply is
//! [`Chart::Unknown`]. The raw JSON stays in
//! [`ExecutionResult::chart`](crate::ExecutionResult::chart).

use serde_json::{Map, Value};

/// How deep superchart nesting is followed: deeper is `Unknown`, so a
/// hostile document cannot make the parse recurse without bound.
const MAX_DEPTH: usize = 8;

/// A chart's kind: `line`, `scatter`, `bar`, `pie`, `box_and_whisker`,
/// `superchart` or `unknown` (the document's `type`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ChartType {
    /// `line`.
    Line,
    /// `scatter`.
    Scatter,
    /// `bar`.
    Bar,
    /// `pie`.
    Pie,
    /// `box_and_whisker`.
    BoxAndWhisker,
    /// `superchart`: several charts in one figure.
    Superchart,
    /// Anything else.
    Unknown,
}

impl ChartType {
    /// The document's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Line => "line",
            Self::Scatter => "scatter",
            Self::Bar => "bar",
            Self::Pie => "pie",
            Self::BoxAndWhisker => "box_and_whisker",
            Self::Superchart => "superchart",
            Self::Unknown => "unknown",
        }
    }
}

/// The scale of an axis of a line or scatter chart (matplotlib's names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ScaleType {
    /// `linear`.
    Linear,
    /// `datetime`.
    Datetime,
    /// `categorical`.
    Categorical,
    /// `log`.
    Log,
    /// `symlog`.
    Symlog,
    /// `logit`.
    Logit,
    /// `function`.
    Function,
    /// `functionlog`.
    Functionlog,
    /// `asinh`.
    Asinh,
}

impl ScaleType {
    const ALL: [ScaleType; 9] = [
        Self::Linear,
        Self::Datetime,
        Self::Categorical,
        Self::Log,
        Self::Symlog,
        Self::Logit,
        Self::Function,
        Self::Functionlog,
        Self::Asinh,
    ];

    /// The document's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Linear => "linear",
            Self::Datetime => "datetime",
            Self::Categorical => "categorical",
            Self::Log => "log",
            Self::Symlog => "symlog",
            Self::Logit => "logit",
            Self::Function => "function",
            Self::Functionlog => "functionlog",
            Self::Asinh => "asinh",
        }
    }
}

/// A coordinate: a number, or a text (a category, a date as text).
#[derive(Debug, Clone, PartialEq)]
pub enum Coordinate {
    /// A JSON number.
    Number(f64),
    /// A JSON string.
    Text(String),
}

/// One point: `(x, y)`.
pub type Point = (Coordinate, Coordinate);

/// A chart, by kind.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Chart {
    /// `line`.
    Line(PointChart),
    /// `scatter`.
    Scatter(PointChart),
    /// `bar`.
    Bar(BarChart),
    /// `pie`.
    Pie(PieChart),
    /// `box_and_whisker`.
    BoxAndWhisker(BoxAndWhiskerChart),
    /// `superchart`: several charts in one figure.
    Superchart(SuperChart),
    /// Not a chart this SDK knows (or not a JSON object): its title, when
    /// the document had one.
    Unknown {
        /// The document's `title`.
        title: Option<String>,
    },
}

/// The axes' labels and units of a two-dimensional chart.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Axes {
    /// `x_label`.
    pub x_label: Option<String>,
    /// `y_label`.
    pub y_label: Option<String>,
    /// `x_unit`.
    pub x_unit: Option<String>,
    /// `y_unit`.
    pub y_unit: Option<String>,
}

/// A line or scatter chart.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct PointChart {
    /// `title`.
    pub title: Option<String>,
    /// Labels and units.
    pub axes: Axes,
    /// `x_ticks`.
    pub x_ticks: Vec<Coordinate>,
    /// `x_tick_labels`.
    pub x_tick_labels: Vec<String>,
    /// `x_scale` (`None` when absent or unknown).
    pub x_scale: Option<ScaleType>,
    /// `y_ticks`.
    pub y_ticks: Vec<Coordinate>,
    /// `y_tick_labels`.
    pub y_tick_labels: Vec<String>,
    /// `y_scale` (`None` when absent or unknown).
    pub y_scale: Option<ScaleType>,
    /// One series per line or scatter set.
    pub elements: Vec<PointData>,
}

/// One series of a line or scatter chart.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct PointData {
    /// `label`.
    pub label: Option<String>,
    /// `points`: `[x, y]` pairs (malformed ones dropped).
    pub points: Vec<Point>,
}

/// A bar chart.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct BarChart {
    /// `title`.
    pub title: Option<String>,
    /// Labels and units.
    pub axes: Axes,
    /// One bar each.
    pub elements: Vec<BarData>,
}

/// One bar.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct BarData {
    /// `label`.
    pub label: Option<String>,
    /// `group`.
    pub group: Option<String>,
    /// `value`.
    pub value: Option<Coordinate>,
}

/// A pie chart.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct PieChart {
    /// `title`.
    pub title: Option<String>,
    /// One wedge each.
    pub elements: Vec<PieData>,
}

/// One wedge.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct PieData {
    /// `label`.
    pub label: Option<String>,
    /// `angle`, degrees.
    pub angle: Option<f64>,
    /// `radius`.
    pub radius: Option<f64>,
    /// `autopct`: the shown percentage (a number, or matplotlib's text).
    pub autopct: Option<Coordinate>,
}

/// A box-and-whisker chart.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct BoxAndWhiskerChart {
    /// `title`.
    pub title: Option<String>,
    /// Labels and units.
    pub axes: Axes,
    /// One box each.
    pub elements: Vec<BoxAndWhiskerData>,
}

/// One box.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct BoxAndWhiskerData {
    /// `label`.
    pub label: Option<String>,
    /// `min`.
    pub min: Option<f64>,
    /// `first_quartile`.
    pub first_quartile: Option<f64>,
    /// `median`.
    pub median: Option<f64>,
    /// `third_quartile`.
    pub third_quartile: Option<f64>,
    /// `max`.
    pub max: Option<f64>,
    /// `outliers`.
    pub outliers: Vec<f64>,
}

/// Several charts in one figure.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct SuperChart {
    /// `title`.
    pub title: Option<String>,
    /// The charts, each parsed as a document of its own.
    pub elements: Vec<Chart>,
}

impl Chart {
    /// Parses an `e2b/chart` document (JSON text). Never fails: see the
    /// module's rules.
    pub fn parse(json: &str) -> Chart {
        match serde_json::from_str::<Value>(json) {
            Ok(value) => parse_at(&value, 0),
            Err(_) => Chart::Unknown { title: None },
        }
    }

    /// The chart's kind.
    pub fn chart_type(&self) -> ChartType {
        match self {
            Self::Line(_) => ChartType::Line,
            Self::Scatter(_) => ChartType::Scatter,
            Self::Bar(_) => ChartType::Bar,
            Self::Pie(_) => ChartType::Pie,
            Self::BoxAndWhisker(_) => ChartType::BoxAndWhisker,
            Self::Superchart(_) => ChartType::Superchart,
            Self::Unknown { .. } => ChartType::Unknown,
        }
    }

    /// The chart's title.
    pub fn title(&self) -> Option<&str> {
        match self {
            Self::Line(c) | Self::Scatter(c) => c.title.as_deref(),
            Self::Bar(c) => c.title.as_deref(),
            Self::Pie(c) => c.title.as_deref(),
            Self::BoxAndWhisker(c) => c.title.as_deref(),
            Self::Superchart(c) => c.title.as_deref(),
            Self::Unknown { title } => title.as_deref(),
        }
    }
}

fn parse_at(value: &Value, depth: usize) -> Chart {
    let Some(doc) = value.as_object() else {
        return Chart::Unknown { title: None };
    };
    let title = text(doc.get("title"));
    match doc.get("type").and_then(Value::as_str) {
        Some("line") => Chart::Line(point_chart(doc, title)),
        Some("scatter") => Chart::Scatter(point_chart(doc, title)),
        Some("bar") => Chart::Bar(BarChart {
            title,
            axes: axes(doc),
            elements: items(doc, bar),
        }),
        Some("pie") => Chart::Pie(PieChart {
            title,
            elements: items(doc, pie),
        }),
        Some("box_and_whisker") => Chart::BoxAndWhisker(BoxAndWhiskerChart {
            title,
            axes: axes(doc),
            elements: items(doc, boxed),
        }),
        Some("superchart") if depth < MAX_DEPTH => Chart::Superchart(SuperChart {
            title,
            elements: list(doc.get("elements"))
                .iter()
                .filter(|item| item.is_object())
                .map(|item| parse_at(item, depth + 1))
                .collect(),
        }),
        _ => Chart::Unknown { title },
    }
}

fn point_chart(doc: &Map<String, Value>, title: Option<String>) -> PointChart {
    PointChart {
        title,
        axes: axes(doc),
        x_ticks: coordinates(doc.get("x_ticks")),
        x_tick_labels: texts(doc.get("x_tick_labels")),
        x_scale: scale(doc.get("x_scale")),
        y_ticks: coordinates(doc.get("y_ticks")),
        y_tick_labels: texts(doc.get("y_tick_labels")),
        y_scale: scale(doc.get("y_scale")),
        elements: items(doc, |item| PointData {
            label: text(item.get("label")),
            points: list(item.get("points")).iter().filter_map(point).collect(),
        }),
    }
}

fn axes(doc: &Map<String, Value>) -> Axes {
    Axes {
        x_label: text(doc.get("x_label")),
        y_label: text(doc.get("y_label")),
        x_unit: text(doc.get("x_unit")),
        y_unit: text(doc.get("y_unit")),
    }
}

fn bar(item: &Map<String, Value>) -> BarData {
    BarData {
        label: text(item.get("label")),
        group: text(item.get("group")),
        value: item.get("value").and_then(coordinate),
    }
}

fn pie(item: &Map<String, Value>) -> PieData {
    PieData {
        label: text(item.get("label")),
        angle: number(item.get("angle")),
        radius: number(item.get("radius")),
        autopct: item.get("autopct").and_then(coordinate),
    }
}

fn boxed(item: &Map<String, Value>) -> BoxAndWhiskerData {
    BoxAndWhiskerData {
        label: text(item.get("label")),
        min: number(item.get("min")),
        first_quartile: number(item.get("first_quartile")),
        median: number(item.get("median")),
        third_quartile: number(item.get("third_quartile")),
        max: number(item.get("max")),
        outliers: list(item.get("outliers"))
            .iter()
            .filter_map(|v| number(Some(v)))
            .collect(),
    }
}

/// The object items of `elements`, each mapped; other items dropped.
fn items<T>(doc: &Map<String, Value>, each: impl Fn(&Map<String, Value>) -> T) -> Vec<T> {
    list(doc.get("elements"))
        .iter()
        .filter_map(Value::as_object)
        .map(each)
        .collect()
}

fn list(value: Option<&Value>) -> &[Value] {
    value.and_then(Value::as_array).map_or(&[], Vec::as_slice)
}

/// A string, or a number as its text; anything else is `None`.
fn text(value: Option<&Value>) -> Option<String> {
    match value? {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
}

fn texts(value: Option<&Value>) -> Vec<String> {
    list(value).iter().filter_map(|v| text(Some(v))).collect()
}

/// A finite number (booleans are not numbers).
fn number(value: Option<&Value>) -> Option<f64> {
    value?.as_f64().filter(|n| n.is_finite())
}

fn coordinate(value: &Value) -> Option<Coordinate> {
    match value {
        Value::Number(_) => number(Some(value)).map(Coordinate::Number),
        Value::String(s) => Some(Coordinate::Text(s.clone())),
        _ => None,
    }
}

fn coordinates(value: Option<&Value>) -> Vec<Coordinate> {
    list(value).iter().filter_map(coordinate).collect()
}

fn point(value: &Value) -> Option<Point> {
    match value.as_array()?.as_slice() {
        [x, y] => Some((coordinate(x)?, coordinate(y)?)),
        _ => None,
    }
}

fn scale(value: Option<&Value>) -> Option<ScaleType> {
    let name = value?.as_str()?;
    ScaleType::ALL.into_iter().find(|s| s.as_str() == name)
}

#[cfg(test)]
#[path = "chart_tests.rs"]
mod tests;

//! `bench-report`: turns one `bench/run`'s JSON files into `RESULTS.md` and a PNG plot.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use clap::Parser;
use plotters::prelude::*;
use roster_bench::report::{self, Meta, Run};

/// Writes RESULTS.md (and the latency plot) from a directory of loadgen results.
#[derive(Debug, Parser)]
#[command(name = "bench-report", version, about)]
struct Args {
    /// The directory of loadgen JSON files (and skipped.tsv).
    #[arg(long)]
    dir: PathBuf,
    /// meta.json: date, nproc, cpu, command, versions, targets.
    #[arg(long)]
    meta: PathBuf,
    /// Where to write the markdown.
    #[arg(long)]
    out: PathBuf,
    /// Where to write the PNG; its file name is linked from the markdown.
    #[arg(long)]
    png: Option<PathBuf>,
    /// A TrueType font for the plot's text.
    #[arg(
        long,
        default_value = "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf"
    )]
    font: PathBuf,
    /// Extra sections as TITLE=FILE, appended verbatim when FILE exists.
    #[arg(long)]
    extra: Vec<String>,
}

fn plot(series: &[(String, [f64; 5])], png: &Path, font: &Path) -> anyhow::Result<()> {
    let bytes = std::fs::read(font).with_context(|| format!("reading font {}", font.display()))?;
    // plotters keeps the font for the process's life; the binary draws once and exits.
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
        .map_err(|_| anyhow::anyhow!("{} is not a usable TrueType font", font.display()))?;
    let max = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .fold(1.0_f64, f64::max);
    let min = series
        .iter()
        .flat_map(|(_, v)| v.iter().copied())
        .fold(f64::MAX, f64::min)
        .max(1.0);
    let root = BitMapBackend::new(png, (1100, 650)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(
            "tools/call latency percentiles per target (log scale)",
            ("sans-serif", 24),
        )
        .margin(20)
        .x_label_area_size(40)
        .y_label_area_size(70)
        .build_cartesian_2d(-0.2f64..4.2f64, ((min / 1.5)..(max * 1.5)).log_scale())?;
    let names = ["p50", "p90", "p99", "p99.9", "max"];
    chart
        .configure_mesh()
        .x_labels(5)
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 0.05 && (0.0..=4.0).contains(&i) {
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                names[i as usize].to_owned()
            } else {
                String::new()
            }
        })
        .y_desc("latency, µs")
        .y_label_formatter(&|y| format!("{y:.0}"))
        .label_style(("sans-serif", 15))
        .draw()?;
    for (i, (name, values)) in series.iter().enumerate() {
        let colour = Palette99::pick(i).to_rgba();
        let points: Vec<(f64, f64)> = values
            .iter()
            .enumerate()
            .map(|(x, &y)| (x as f64, y.max(min / 1.5)))
            .collect();
        chart
            .draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))?
            .label(name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
            });
        chart.draw_series(
            points
                .into_iter()
                .map(|p| Circle::new(p, 3, colour.filled())),
        )?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font(("sans-serif", 15))
        .draw()?;
    root.present()?;
    Ok(())
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let run = Run::read(&args.dir)?;
    let meta: Meta = match std::fs::read_to_string(&args.meta) {
        Ok(text) => serde_json::from_str(&text)
            .with_context(|| format!("{} is not valid meta JSON", args.meta.display()))?,
        Err(e) => anyhow::bail!("could not read {}: {e}", args.meta.display()),
    };
    let mut plotted = None;
    if let Some(png) = &args.png {
        let series = report::plot_series(&run);
        if series.is_empty() {
            eprintln!("bench-report: no tools/call results, no plot");
        } else {
            match plot(&series, png, &args.font) {
                Ok(()) => plotted = png.file_name().map(|n| n.to_string_lossy().into_owned()),
                Err(e) => eprintln!("bench-report: plot not drawn: {e:#}"),
            }
        }
    }
    let extra: Vec<(String, String)> = args
        .extra
        .iter()
        .filter_map(|spec| {
            let (title, file) = spec.split_once('=')?;
            let body = std::fs::read_to_string(file).ok()?;
            Some((title.to_owned(), body))
        })
        .collect();
    let md = report::markdown(&run, &meta, plotted.as_deref(), &extra);
    std::fs::write(&args.out, md).with_context(|| format!("writing {}", args.out.display()))?;
    Ok(())
}

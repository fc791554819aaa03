//! Aligned text tables, as kubectl prints them: upper-case headers, columns separated by
//! three spaces, no trailing blanks.

/// A table being filled row by row.
#[derive(Clone, Debug)]
pub struct Table {
    header: Vec<String>,
    rows: Vec<Vec<String>>,
}

impl Table {
    /// An empty table with these column headers.
    pub fn new(header: &[&str]) -> Self {
        Self {
            header: header.iter().map(|h| (*h).to_string()).collect(),
            rows: Vec::new(),
        }
    }

    /// Adds a row; missing cells are blank, extra cells are dropped.
    pub fn row(&mut self, cells: Vec<String>) {
        let mut cells = cells;
        cells.resize(self.header.len(), String::new());
        self.rows.push(cells);
    }

    /// Whether no row was added.
    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The table as text, one line per row after the header, each ending in a newline.
    pub fn render(&self) -> String {
        let widths: Vec<usize> = (0..self.header.len())
            .map(|column| {
                std::iter::once(&self.header)
                    .chain(&self.rows)
                    .map(|row| row[column].chars().count())
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        let mut out = String::new();
        for row in std::iter::once(&self.header).chain(&self.rows) {
            let mut line = String::new();
            for (column, cell) in row.iter().enumerate() {
                if column > 0 {
                    line.push_str("   ");
                }
                line.push_str(cell);
                let pad = widths[column] - cell.chars().count();
                line.extend(std::iter::repeat_n(' ', pad));
            }
            out.push_str(line.trim_end());
            out.push('\n');
        }
        out
    }
}

/// How long ago `then` was, as kubectl's AGE column shows it: `45s`, `3m12s`, `25m`, `5h`,
/// `3d`.
pub fn age(then: Option<jiff::Timestamp>, now: jiff::Timestamp) -> String {
    let Some(then) = then else {
        return "<unknown>".into();
    };
    let seconds = now.duration_since(then).as_secs().max(0);
    match seconds {
        0..120 => format!("{seconds}s"),
        120..600 => format!("{}m{}s", seconds / 60, seconds % 60),
        600..10_800 => format!("{}m", seconds / 60),
        10_800..172_800 => format!("{}h", seconds / 3600),
        _ => format!("{}d", seconds / 86_400),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn columns_align_and_lines_have_no_trailing_blanks() {
        let mut table = Table::new(&["NAME", "PHASE", "NOTE"]);
        table.row(vec!["a".into(), "Running".into(), String::new()]);
        table.row(vec!["longer-name".into(), "Pending".into(), "x".into()]);
        assert_eq!(
            table.render(),
            "NAME          PHASE     NOTE\na             Running\nlonger-name   Pending   x\n"
        );
    }

    #[test]
    fn ages_read_like_kubectls() {
        let now = jiff::Timestamp::from_second(1_000_000).unwrap();
        let ago = |seconds: i64| age(Some(now - jiff::SignedDuration::from_secs(seconds)), now);
        assert_eq!(
            [ago(45), ago(192), ago(1500), ago(18_000), ago(259_200)],
            ["45s", "3m12s", "25m", "5h", "3d"]
        );
        assert_eq!(age(None, now), "<unknown>");
    }
}

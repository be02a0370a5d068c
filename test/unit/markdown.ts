/**
 * Just enough Markdown for the docs' tests: headings and the anchors GitHub gives them, the links a
 * page holds, the code spans of its prose and the rows of its tables. Fenced code blocks are left
 * out of all of them, as GitHub renders them verbatim. Pure.
 */

/** The lines of `text` outside fenced code blocks, with their 1-based line numbers. */
export function proseLines(text: string): { readonly line: number; readonly text: string }[] {
    const lines: { line: number; text: string }[] = [];
    let fence: string | undefined;
    text.split("\n").forEach((line, index) => {
        const marker = /^ {0,3}(`{3,}|~{3,})/.exec(line)?.[1];
        if (fence === undefined && marker) {
            fence = marker[0];
        } else if (fence !== undefined && marker && marker[0] === fence) {
            fence = undefined;
        } else if (fence === undefined) {
            lines.push({ line: index + 1, text: line });
        }
    });
    return lines;
}

/** A heading's text as GitHub renders it: code spans, links and emphasis markers reduced to their text. */
function renderedText(heading: string): string {
    return heading
        .replace(/!?\[([^\]]*)\]\([^)]*\)/g, "$1")
        .replace(/<[^>]+>/g, "")
        .replace(/`/g, "")
        .replace(/\*+/g, "");
}

/**
 * The anchor GitHub makes of a heading (github-slugger): lowercased, every character but letters,
 * digits, marks, '_', '-' and spaces dropped, each space a '-'.
 */
export function githubSlug(heading: string): string {
    return renderedText(heading)
        .trim()
        .toLowerCase()
        .replace(/[^\p{L}\p{M}\p{N}\p{Pc} -]/gu, "")
        .replace(/ /g, "-");
}

/** The ATX headings of a page, in order: level, text and line. */
export function headings(text: string): { readonly level: number; readonly text: string; readonly line: number }[] {
    return proseLines(text).flatMap(({ line, text: content }) => {
        const match = /^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$/.exec(content);
        return match ? [{ level: match[1].length, text: match[2], line }] : [];
    });
}

/** Every anchor of a page: each heading's slug, a repeated one with -1, -2, ... as GitHub numbers them. */
export function anchors(text: string): Set<string> {
    const seen = new Map<string, number>();
    const result = new Set<string>();
    for (const heading of headings(text)) {
        const base = githubSlug(heading.text);
        let slug = base;
        let count = seen.get(base) ?? 0;
        while (result.has(slug)) {
            count += 1;
            slug = `${base}-${count}`;
        }
        seen.set(base, count);
        result.add(slug);
    }
    return result;
}

/**
 * The paragraphs of a page's prose (runs of lines outside code blocks, split at blank lines), each
 * as one text with the line it starts on: a code span or a link may run over a line break.
 */
function proseBlocks(text: string): { readonly line: number; readonly text: string }[] {
    const blocks: { line: number; text: string }[] = [];
    let last = -1;
    for (const entry of proseLines(text)) {
        const current = blocks[blocks.length - 1];
        if (entry.text.trim() === "") {
            last = -1;
        } else if (current && entry.line === last + 1) {
            current.text += `\n${entry.text}`;
            last = entry.line;
        } else {
            blocks.push({ line: entry.line, text: entry.text });
            last = entry.line;
        }
    }
    return blocks;
}

const CODE_SPAN = /(`+)(?!`)([\s\S]*?[^`])\1(?!`)/g;

/** The line of `offset` in a block that starts at `line`. */
function lineAt(block: { readonly line: number; readonly text: string }, offset: number): number {
    return block.line + (block.text.slice(0, offset).match(/\n/g)?.length ?? 0);
}

/** The links of a page (inline links and images, and reference definitions): their target and line. */
export function links(text: string): { readonly target: string; readonly line: number }[] {
    return proseBlocks(text).flatMap((block) => {
        // Code spans blanked out, line breaks kept, so that nothing inside one reads as a link.
        const prose = { line: block.line, text: block.text.replace(CODE_SPAN, (span) => span.replace(/[^\n]/g, "x")) };
        const found: { target: string; line: number }[] = [];
        for (const match of prose.text.matchAll(/\]\(\s*(<[^>]*>|[^)\s]+)(?:\s+("[^"]*"|'[^']*'))?\s*\)/g)) {
            found.push({ target: match[1].replace(/^<(.*)>$/, "$1"), line: lineAt(prose, match.index) });
        }
        for (const match of prose.text.matchAll(/^ {0,3}\[[^\]]+\]:\s*(\S+)/gm)) {
            found.push({ target: match[1].replace(/^<(.*)>$/, "$1"), line: lineAt(prose, match.index) });
        }
        return found.sort((a, b) => a.line - b.line);
    });
}

/** The code spans of a page's prose (a line break inside one read as a space), with their line. */
export function codeSpans(text: string): { readonly code: string; readonly line: number }[] {
    return proseBlocks(text).flatMap((block) =>
        [...block.text.matchAll(CODE_SPAN)].map((match) => ({ code: match[2].replace(/\s*\n\s*/g, " ").trim(), line: lineAt(block, match.index) })),
    );
}

/** A table of a page: its header cells and its rows (each row's cells, with the row's line). */
export interface Table {
    readonly header: readonly string[];
    readonly line: number;
    readonly rows: readonly { readonly cells: readonly string[]; readonly line: number }[];
}

/** The cells of a table row (`| a | b |`); a `|` inside a code span or escaped as `\|` stays in its cell. */
function cells(row: string): string[] {
    const result: string[] = [];
    let cell = "";
    let code = false;
    const inner = row.trim().replace(/^\|/, "").replace(/\|$/, "");
    for (let index = 0; index < inner.length; index++) {
        const char = inner[index];
        if (char === "\\" && inner[index + 1] === "|") {
            cell += "|";
            index += 1;
        } else if (char === "`") {
            code = !code;
            cell += char;
        } else if (char === "|" && !code) {
            result.push(cell.trim());
            cell = "";
        } else {
            cell += char;
        }
    }
    result.push(cell.trim());
    return result;
}

/** The pipe tables of a page. */
export function tables(text: string): Table[] {
    const lines = proseLines(text);
    const found: Table[] = [];
    for (let index = 0; index + 1 < lines.length; index++) {
        const isRow = (entry: { text: string }) => /^\s*\|.*\|\s*$/.test(entry.text);
        if (!isRow(lines[index]) || !/^\s*\|(\s*:?-+:?\s*\|)+\s*$/.test(lines[index + 1].text)) {
            continue;
        }
        const rows: { cells: string[]; line: number }[] = [];
        let next = index + 2;
        while (next < lines.length && isRow(lines[next]) && lines[next].line === lines[next - 1].line + 1) {
            rows.push({ cells: cells(lines[next].text), line: lines[next].line });
            next += 1;
        }
        found.push({ header: cells(lines[index].text), line: lines[index].line, rows });
        index = next - 1;
    }
    return found;
}

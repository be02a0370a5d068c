/**
 * What the tools' charts share (tools/timeline/svg.ts, tools/loadtest/svg.ts): SVG drawn by hand, its
 * text escaped, and the same head, a white page with a bold title and a line under it.
 */

/** Escapes text for SVG content and attribute values. */
export function escapeXml(text: string): string {
    return text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;").replace(/'/g, "&apos;");
}

/** The opening of a chart's SVG document: the page, its title and the line under it (the caller closes it with `</svg>`). */
export function svgHead(width: number, height: number, title: string, subtitle: string, textColor: string): string[] {
    return [
        `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}" font-family="sans-serif" font-size="11">`,
        `<rect width="${width}" height="${height}" fill="#ffffff"/>`,
        `<text x="10" y="20" font-size="15" font-weight="bold" fill="${textColor}">${escapeXml(title)}</text>`,
        `<text x="10" y="38" fill="${textColor}">${escapeXml(subtitle)}</text>`,
    ];
}

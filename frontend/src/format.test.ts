import { describe, expect, it } from "vitest";
import { formatAgo, formatBytes, formatFileSize, formatPercent, parseServerTime } from "./format";

describe("format", () => {
  it("humanises rss in binary units", () => {
    expect(formatBytes(52_428_800)).toBe("50.0 MiB");
    expect(formatBytes(1536)).toBe("1.5 KiB");
    expect(formatBytes(2 * 1024 ** 3)).toBe("2048.0 MiB");
    expect(formatBytes(12 * 1024 **3)).toBe("12.0 GiB");
  });

  it("sizes files in the largest unit that keeps the number under 1024", () => {
    expect(formatFileSize(57_491_558)).toBe("54.8 MiB"); // was "56,144.6 KiB"
    expect(formatFileSize(0)).toBe("0 B");
    expect(formatFileSize(1023)).toBe("1023 B");
    expect(formatFileSize(1024)).toBe("1.0 KiB");
    expect(formatFileSize(1536)).toBe("1.5 KiB");
    expect(formatFileSize(1024 * 1024 - 1)).toBe("1.0 MiB"); // not "1024.0 KiB"
    expect(formatFileSize(3.25 * 1024 ** 3)).toBe("3.3 GiB");
    expect(formatFileSize(2 * 1024 ** 4)).toBe("2.0 TiB");
    expect(formatFileSize(-1)).toBe("–");
    expect(formatFileSize(Number.NaN)).toBe("–");
  });

  it("formats cpu percent", () => {
    expect(formatPercent(12.345)).toBe("12.3 %");
  });

  it("reads zone-less server timestamps as UTC", () => {
    expect(parseServerTime("2025-01-01T00:00:00")).toBe(Date.UTC(2025, 0, 1));
    expect(parseServerTime("2025-01-01T00:00:00+00:00")).toBe(Date.UTC(2025, 0, 1));
  });

  it("says how long ago", () => {
    const now = Date.UTC(2025, 0, 1, 12, 0, 0);
    expect(formatAgo("2025-01-01T11:59:58Z", now)).toBe("2 s ago");
    expect(formatAgo("2025-01-01T12:00:05Z", now)).toBe("0 s ago");
    expect(formatAgo("2025-01-01T11:55:00Z", now)).toBe("5 min ago");
    expect(formatAgo("2025-01-01T09:00:00Z", now)).toBe("3 h ago");
    expect(formatAgo("not a date", now)).toBe("never");
  });
});

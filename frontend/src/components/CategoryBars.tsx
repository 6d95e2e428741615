import { memo } from "react";
import { categoryBars } from "../state/populations";

/** Agents per category of one distribution, as plain CSS bars (a table underneath, for screen readers). */
export const CategoryBars = memo(function CategoryBars({ name, counts }: { name: string; counts: Record<string, number> }) {
  const bars = categoryBars(counts);
  const headingId = `dist-${name}`;
  return (
    <figure className="bars">
      <figcaption id={headingId}>{name}</figcaption>
      <table className="bars-table" aria-labelledby={headingId}>
        <tbody>
          {bars.map((bar) => (
            <tr key={bar.name} aria-label={bar.name}>
              <th scope="row">{bar.name}</th>
              <td className="bar-cell">
                <span className="bar" style={{ width: `${(bar.share * 100).toFixed(2)}%` }} aria-hidden="true" />
              </td>
              <td className="num">{bar.count.toLocaleString("en-US")}</td>
              <td className="num muted">{(bar.share * 100).toFixed(1)} %</td>
            </tr>
          ))}
        </tbody>
      </table>
    </figure>
  );
});

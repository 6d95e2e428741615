import { useEffect, useState } from "react";
import { THEME_CHOICES, THEME_KEY, type ThemeChoice, applyTheme, loadThemeChoice, parseThemeChoice, resolveTheme, saveThemeChoice, systemPrefersDark, watchSystemTheme } from "../theme";

/**
 * Light, dark or the system's theme: a labelled select (keyboard and screen readers know it).
 * The choice is remembered for every tab; on "system" the page follows the OS as it changes.
 */
export function ThemeSwitch() {
  const [choice, setChoice] = useState<ThemeChoice>(() => loadThemeChoice());
  const [systemDark, setSystemDark] = useState(() => systemPrefersDark());

  useEffect(() => applyTheme(resolveTheme(choice, systemDark)), [choice, systemDark]);
  useEffect(() => watchSystemTheme(setSystemDark), []);
  // Another tab chose: follow it.
  useEffect(() => {
    const onStorage = (event: StorageEvent) => {
      if (event.key === THEME_KEY || event.key === null) setChoice(parseThemeChoice(event.newValue));
    };
    window.addEventListener("storage", onStorage);
    return () => window.removeEventListener("storage", onStorage);
  }, []);

  return (
    <label className="theme-switch">
      <span className="visually-hidden">Theme</span>
      <select
        value={choice}
        onChange={(event) => {
          const next = parseThemeChoice(event.target.value);
          saveThemeChoice(next);
          setChoice(next);
        }}
      >
        {THEME_CHOICES.map((option) => (
          <option key={option.value} value={option.value}>
            {option.label}
          </option>
        ))}
      </select>
    </label>
  );
}

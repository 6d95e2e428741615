import { useEffect, useRef, useState, type FormEvent } from "react";
import { ApiClient, ApiError, NetworkError } from "../api/client";
import type { ApiInfo } from "../api/types";

interface LoginPageProps {
  /** Why we are here, e.g. the token was rejected on another page. */
  initialError: string | null;
  onSignedIn: (token: string, info: ApiInfo) => void;
}

export function signInErrorMessage(err: unknown): string {
  if (err instanceof ApiError) {
    if (err.status === 401) return `Invalid API token: ${err.detail}`;
    return `Sign-in failed: the manager answered HTTP ${err.status}: ${err.detail}`;
  }
  if (err instanceof NetworkError) return `Sign-in failed: ${err.message}`;
  return `Sign-in failed: ${err instanceof Error ? err.message : String(err)}`;
}

export function LoginPage({ initialError, onSignedIn }: LoginPageProps) {
  const [token, setToken] = useState("");
  const [error, setError] = useState<string | null>(initialError);
  const [pending, setPending] = useState(false);
  const inputRef = useRef<HTMLInputElement>(null);

  useEffect(() => {
    document.title = "Sign in · populace";
    inputRef.current?.focus();
  }, []);

  async function handleSubmit(event: FormEvent<HTMLFormElement>) {
    event.preventDefault();
    const candidate = token.trim();
    if (!candidate) {
      setError("Enter an API token.");
      inputRef.current?.focus();
      return;
    }
    setPending(true);
    setError(null);
    try {
      const info = await new ApiClient(candidate).info();
      onSignedIn(candidate, info);
    } catch (err) {
      setError(signInErrorMessage(err));
      setPending(false);
      inputRef.current?.select();
    }
  }

  return (
    <main className="login">
      <form className="card login-card" onSubmit={handleSubmit} noValidate aria-busy={pending}>
        <h1>Sign in</h1>
        <p className="muted">
          Use the manager's API token. It is printed when the manager first starts and stored in{" "}
          <code>.populace/api_token</code> (or set with <code>POPULACE_API_TOKEN</code>). A viewer token (
          <code>populace tokens viewer</code>) signs in read-only.
        </p>
        <label htmlFor="api-token">API token</label>
        <input
          id="api-token"
          ref={inputRef}
          type="password"
          autoComplete="off"
          spellCheck={false}
          value={token}
          onChange={(e) => setToken(e.target.value)}
          aria-invalid={error !== null}
          aria-describedby={error !== null ? "login-error" : undefined}
        />
        {error !== null && (
          <p id="login-error" className="alert" role="alert">
            {error}
          </p>
        )}
        <button type="submit" className="button primary" disabled={pending}>
          Sign in
        </button>
      </form>
    </main>
  );
}

//! The `native` extraction backend (hermesd's own): fetch the page through the SSRF guard and
//! turn its HTML into readable text here — Readability (`dom_smoothie`) first, plain
//! `html2text` when no article is found. Bodies are capped before parsing and parsing runs on
//! the blocking pool, because Readability is super-linear on hostile pages.

use std::time::Duration;

use futures_util::StreamExt;

use super::WebSettings;
use super::guard;

/// Bytes of a page read at most; the rest is never downloaded.
pub const MAX_BODY_BYTES: usize = 5 * 1024 * 1024;
/// Elements Readability looks at, at most.
const MAX_ELEMENTS: usize = 20_000;
const FETCH_TIMEOUT: Duration = Duration::from_secs(30);

/// A fetched page's title and text.
#[derive(Debug, Clone, PartialEq)]
pub struct Page {
    pub url: String,
    pub title: String,
    pub text: String,
}

/// Fetches `url` (already checked by the caller) and extracts its text.
pub async fn fetch(settings: &WebSettings, url: reqwest::Url) -> Result<Page, String> {
    let client = guard::guarded_client(
        settings.net.tls_config(),
        settings.lookup.clone(),
        settings.config.allow_private_urls,
        settings.timeout.unwrap_or(FETCH_TIMEOUT),
    )
    .map_err(|e| e.to_string())?;
    let response = client
        .get(url.clone())
        .header("accept", "text/html,application/xhtml+xml,text/plain;q=0.8")
        .send()
        .await
        .map_err(|e| match guard::blocked_in(&e) {
            Some(blocked) => blocked.to_string(),
            None if e.is_timeout() => "the page did not answer in time".to_owned(),
            None => format!(
                "the page could not be fetched: {}",
                hermes_adapter::net::error_chain(&e)
            ),
        })?;
    let status = response.status();
    let final_url = response.url().to_string();
    if !status.is_success() {
        return Err(format!("the page answered HTTP {}", status.as_u16()));
    }
    let content_type = response
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("text/html")
        .to_ascii_lowercase();
    let is_html = content_type.contains("html");
    if !is_html && !content_type.starts_with("text/") && !content_type.contains("json") {
        return Err(format!("cannot extract text from {content_type}"));
    }
    let mut body = Vec::new();
    let mut stream = response.bytes_stream();
    while let Some(chunk) = stream.next().await {
        let chunk = chunk.map_err(|e| format!("the page broke off: {e}"))?;
        let room = MAX_BODY_BYTES - body.len();
        body.extend_from_slice(&chunk[..chunk.len().min(room)]);
        if body.len() >= MAX_BODY_BYTES {
            break;
        }
    }
    let html = String::from_utf8_lossy(&body).into_owned();
    if !is_html {
        return Ok(Page {
            url: final_url,
            title: String::new(),
            text: html,
        });
    }
    let page_url = final_url.clone();
    let (title, text) = tokio::task::spawn_blocking(move || readable(&html, &page_url))
        .await
        .map_err(|e| format!("extraction failed: {e}"))?;
    Ok(Page {
        url: final_url,
        title,
        text,
    })
}

/// The title and readable text of `html`: Readability's article as Markdown, else the whole
/// page as plain text.
pub fn readable(html: &str, url: &str) -> (String, String) {
    let config = dom_smoothie::Config {
        text_mode: dom_smoothie::TextMode::Markdown,
        max_elements_to_parse: MAX_ELEMENTS,
        ..Default::default()
    };
    if let Ok(mut reader) = dom_smoothie::Readability::new(html, Some(url), Some(config))
        && let Ok(article) = reader.parse()
    {
        let text = article.text_content.trim().to_owned();
        if !text.is_empty() {
            return (article.title.trim().to_owned(), text);
        }
    }
    let text = html2text::from_read(html.as_bytes(), 100).unwrap_or_default();
    (String::new(), text.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_article_page_gives_its_title_and_text_without_the_chrome() {
        let html = r#"<html><head><title>Bread at home</title></head><body>
            <nav><a href="/">Home</a> <a href="/shop">Shop</a></nav>
            <article><h1>Bread at home</h1>
            <p>Mix flour, water, salt and yeast. Knead the dough for ten minutes until it is
            smooth and elastic, then let it rise in a warm place for an hour or two.</p>
            <p>Shape the loaf, let it rise again, and bake it at 230 degrees for about thirty
            five minutes, until the crust is deep brown and the bottom sounds hollow.</p>
            <p>Let the bread cool on a rack before slicing so the crumb can set properly.</p>
            </article><footer>Copyright</footer></body></html>"#;
        let (title, text) = readable(html, "https://bread.test/");
        assert_eq!(title, "Bread at home");
        assert!(text.contains("Knead the dough"), "{text}");
        assert!(!text.contains("Shop"), "{text}");
    }

    #[test]
    fn a_page_without_an_article_still_gives_text() {
        let (_, text) = readable(
            "<html><body><ul><li>one</li><li>two</li></ul></body></html>",
            "https://x.test/",
        );
        assert!(text.contains("one") && text.contains("two"), "{text}");
    }
}

//! Turning transport failures and Discord's error answers into [`RestError`]s with the
//! core's [`SendErrorKind`], and naming routes without ids or interaction tokens.

use std::time::Duration;

use hermes_adapter::SendErrorKind;
use reqwest::{Method, StatusCode};
use serde_json::Value;

use super::RestError;

/// `/channels/123/messages?limit=5` → `/channels/{id}/messages` (for logs and errors;
/// interaction tokens are replaced too).
pub(super) fn route_of(path: &str) -> String {
    let path = path.split('?').next().unwrap_or(path);
    let mut out: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        let after_id = out.last() == Some(&"{id}")
            && matches!(
                out.get(out.len().wrapping_sub(2)),
                Some(&"interactions") | Some(&"webhooks")
            );
        if !segment.is_empty() && segment.chars().all(|c| c.is_ascii_digit()) {
            out.push("{id}");
        } else if after_id {
            out.push("{token}");
        } else {
            out.push(segment);
        }
    }
    out.join("/")
}

pub(super) fn transport_error(route: &str, method: &Method, error: reqwest::Error) -> RestError {
    // Connection refused / DNS / TLS before anything was written: safe to retry. A timeout
    // or a broken connection after the request went out may have been applied.
    let kind = if error.is_connect() || (*method == Method::GET) {
        SendErrorKind::Transient
    } else {
        SendErrorKind::Ambiguous
    };
    RestError {
        route: route.to_owned(),
        status: None,
        code: None,
        // The whole chain: the reason (a refused certificate, a refused CONNECT) is at its end.
        message: hermes_adapter::net::error_chain(&error.without_url()),
        kind,
        retry_after: None,
    }
}

fn header_seconds(headers: &reqwest::header::HeaderMap, name: &str) -> Option<f64> {
    headers.get(name)?.to_str().ok()?.trim().parse::<f64>().ok()
}

pub(super) fn classify(
    route: String,
    status: StatusCode,
    headers: &reqwest::header::HeaderMap,
    body: &Value,
) -> RestError {
    let code = body["code"].as_u64();
    let mut message = body["message"].as_str().unwrap_or("").to_owned();
    if message.is_empty() {
        message = status.to_string();
    }
    let detail = body["errors"].to_string();
    let mut retry_after = None;
    let kind = match status.as_u16() {
        429 => {
            let seconds = body["retry_after"]
                .as_f64()
                .or_else(|| header_seconds(headers, "x-ratelimit-reset-after"))
                .or_else(|| header_seconds(headers, "retry-after"))
                .unwrap_or(1.0);
            retry_after = Some(Duration::from_secs_f64(seconds.clamp(0.0, 3600.0)));
            SendErrorKind::RateLimited
        }
        400 if detail.contains("BASE_TYPE_MAX_LENGTH") || detail.contains("fewer in length") => {
            SendErrorKind::TooLong
        }
        400 if code == Some(10008) || code == Some(10003) => SendErrorKind::NotFound,
        400 if code == Some(50035) => SendErrorKind::BadFormat,
        401 | 403 => SendErrorKind::Forbidden,
        404 => SendErrorKind::NotFound,
        500..=599 => SendErrorKind::Transient,
        _ => SendErrorKind::Unknown,
    };
    if detail != "null" {
        message = format!("{message} {detail}");
    }
    RestError {
        route,
        status: Some(status.as_u16()),
        code,
        message: format!("{} {message}", status.as_u16()),
        kind,
        retry_after,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn routes_hide_ids_and_interaction_tokens() {
        assert_eq!(
            route_of("/channels/12/messages?limit=3"),
            "/channels/{id}/messages"
        );
        assert_eq!(
            route_of("/interactions/55/aW50ZXJhY3Rpb24/callback"),
            "/interactions/{id}/{token}/callback"
        );
    }

    #[test]
    fn discord_errors_map_to_send_error_kinds() {
        let headers = reqwest::header::HeaderMap::new();
        let cases = [
            (
                429,
                json!({"retry_after": 1.5, "global": false}),
                SendErrorKind::RateLimited,
            ),
            (
                400,
                json!({"code": 50035, "errors": {"content": {"_errors": [{"code": "BASE_TYPE_MAX_LENGTH"}]}}}),
                SendErrorKind::TooLong,
            ),
            (
                400,
                json!({"code": 50035, "errors": {"embeds": {}}}),
                SendErrorKind::BadFormat,
            ),
            (403, json!({"code": 50013}), SendErrorKind::Forbidden),
            (404, json!({"code": 10003}), SendErrorKind::NotFound),
            (503, Value::Null, SendErrorKind::Transient),
        ];
        for (status, body, kind) in cases {
            let error = classify(
                "r".into(),
                StatusCode::from_u16(status).unwrap(),
                &headers,
                &body,
            );
            assert_eq!(error.kind, kind, "{status} {body}");
        }
        let limited = classify(
            "r".into(),
            StatusCode::TOO_MANY_REQUESTS,
            &headers,
            &json!({"retry_after": 1.5}),
        );
        assert_eq!(limited.retry_after, Some(Duration::from_millis(1500)));
        let mut headers = reqwest::header::HeaderMap::new();
        headers.insert("retry-after", "3".parse().unwrap());
        let from_header = classify(
            "r".into(),
            StatusCode::TOO_MANY_REQUESTS,
            &headers,
            &Value::Null,
        );
        assert_eq!(from_header.retry_after, Some(Duration::from_secs(3)));
    }
}

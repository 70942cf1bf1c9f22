//! The server's answer to a request line, before any file is opened: the lab's objects are files under
//! /srv/www/obj, served by their path under /obj/ (as nginx's `location /obj/`, quic-go's and aioquic's servers);
//! GET /healthz answers 204. No directory listings, no index files, nothing outside /obj/.

use std::path::PathBuf;

/// What to answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Route {
    /// 204, no body.
    Health,
    /// The file at `ROOT/rel` (rel starts with `obj/`) if it is a regular file, else 404.
    File { rel: PathBuf, content_type: &'static str },
    /// 404.
    NotFound,
    /// 405: only GET and HEAD are served.
    MethodNotAllowed,
}

/// The content type as nginx's types: html for the workloads' test pages, everything else octet-stream.
pub fn content_type(name: &str) -> &'static str {
    if name.ends_with(".html") {
        "text/html"
    } else {
        "application/octet-stream"
    }
}

/// Route a request: `method` and `path` as they came (`:method`, `:path`; a query is ignored).
pub fn route(method: &str, path: &str) -> Route {
    if method != "GET" && method != "HEAD" {
        return Route::MethodNotAllowed;
    }
    let path = path.split(['?', '#']).next().unwrap_or("");
    if path == "/healthz" {
        return Route::Health;
    }
    let Some(rest) = path.strip_prefix("/obj/") else {
        return Route::NotFound;
    };
    let mut rel = PathBuf::from("obj");
    let mut last = "";
    for segment in rest.split('/').filter(|s| !s.is_empty()) {
        if segment == "." || segment == ".." || segment.contains(['\\', '\0']) || segment.contains('%') {
            return Route::NotFound; // no way out of /obj/, and no percent-decoding: the lab's names need none
        }
        rel.push(segment);
        last = segment;
    }
    if last.is_empty() || path.ends_with('/') {
        return Route::NotFound; // a directory
    }
    Route::File { rel, content_type: content_type(last) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::path::Component;

    #[test]
    fn the_labs_objects_map_to_their_files() {
        assert_eq!(route("GET", "/obj/1000000"),
                   Route::File { rel: "obj/1000000".into(), content_type: "application/octet-stream" });
        assert_eq!(route("HEAD", "/obj/page-4-1000/index.html?x=1"),
                   Route::File { rel: "obj/page-4-1000/index.html".into(), content_type: "text/html" });
        assert_eq!(route("GET", "/healthz"), Route::Health);
        assert_eq!(route("POST", "/obj/1000"), Route::MethodNotAllowed);
        for bad in ["/", "/obj/", "/obj/page-4-1000/", "/etc/passwd", "/obj/../pki/x", "/obj/a/./b", "/objx",
                    "/obj/%2e%2e/x", "obj/1000"] {
            assert_eq!(route("GET", bad), Route::NotFound, "{bad}");
        }
    }

    proptest! {
        /// Whatever the path, a file route stays under obj/ and names no parent or current directory.
        #[test]
        fn a_file_route_never_leaves_obj(path in "[/a-z0-9.%?\\\\-]{0,40}") {
            if let Route::File { rel, .. } = route("GET", &path) {
                let parts: Vec<_> = rel.components().collect();
                prop_assert_eq!(parts[0], Component::Normal("obj".as_ref()));
                prop_assert!(parts.len() >= 2);
                prop_assert!(parts.iter().all(|c| matches!(c, Component::Normal(_))));
            }
        }

        /// Every object name the lab writes (digits; page folders with files) is served under its own path.
        #[test]
        fn object_paths_round_trip(dir in proptest::option::of("page-[0-9]{1,3}-[0-9]{1,8}"),
                                   name in "[a-z0-9-]{1,12}(\\.html|\\.js|\\.css|\\.bin)?") {
            let rel = match &dir { Some(d) => format!("obj/{d}/{name}"), None => format!("obj/{name}") };
            let Route::File { rel: got, content_type: ct } = route("GET", &format!("/{rel}")) else {
                return Err(TestCaseError::fail("not a file"));
            };
            prop_assert_eq!(got, PathBuf::from(&rel));
            prop_assert_eq!(ct == "text/html", name.ends_with(".html"));
        }
    }
}

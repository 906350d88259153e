package throttle

import "strings"

const (
	// DefaultKeyPrefix is prepended to every bucket key unless WithKeyPrefix says otherwise.
	DefaultKeyPrefix = "sluice:"
	// MaxKeyLen bounds a bucket name, in bytes.
	MaxKeyLen = 512
	// maxPrefixLen bounds a key prefix, in bytes.
	maxPrefixLen = 128
)

// hashTag returns the part of key Redis Cluster hashes: the text between the
// first '{' and the first '}' after it, if that is not empty; else "".
func hashTag(key string) string {
	i := strings.IndexByte(key, '{')
	if i < 0 {
		return ""
	}
	j := strings.IndexByte(key[i+1:], '}')
	if j <= 0 {
		return ""
	}
	return key[i+1 : i+1+j]
}

// redisKey is the Redis key of bucket name under prefix. A name that carries a
// hash tag keeps it (so buckets named "{acct}:a" and "{acct}:b" share a slot);
// any other name becomes its own tag, so buckets spread over a cluster.
func redisKey(prefix, name string) string {
	if hashTag(name) != "" {
		return prefix + name
	}
	return prefix + "{" + name + "}"
}

func checkName(name string) error {
	if name == "" {
		return invalidf("bucket name is empty")
	}
	if len(name) > MaxKeyLen {
		return invalidf("bucket name is %d bytes, longer than %d", len(name), MaxKeyLen)
	}
	return nil
}

func checkPrefix(prefix string) error {
	if len(prefix) > maxPrefixLen {
		return invalidf("key prefix is %d bytes, longer than %d", len(prefix), maxPrefixLen)
	}
	if strings.ContainsAny(prefix, "{}") {
		return invalidf("key prefix %q must not contain '{' or '}'", prefix)
	}
	return nil
}

// checkSlot reports whether buckets acquired together can be served by one
// script call on Redis Cluster: every name must carry the same hash tag.
func checkSlot(buckets []Bucket) error {
	if len(buckets) < 2 {
		return nil
	}
	tag := hashTag(buckets[0].Key)
	for _, b := range buckets {
		t := hashTag(b.Key)
		if t == "" || t != tag {
			return &invalidError{
				reason:    "buckets " + quoteNames(buckets) + " acquired together must share a hash tag, e.g. {acct}:tenant:42 and {acct}:global",
				crossSlot: true,
			}
		}
	}
	return nil
}

func quoteNames(buckets []Bucket) string {
	var b strings.Builder
	for i, x := range buckets {
		if i > 0 {
			b.WriteString(", ")
		}
		name := x.Key
		if len(name) > 64 {
			name = name[:64] + "…"
		}
		b.WriteString(`"` + name + `"`)
	}
	return b.String()
}

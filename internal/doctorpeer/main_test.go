package doctorpeer

import (
	"testing"

	"github.com/farwing/farwing/internal/testcache"
)

func TestMain(m *testing.M) { testcache.Main(m) }

import factory
from django.contrib.auth import get_user_model

from anonweb.accounts.models import Membership, Role, Team

PASSWORD = "correct horse battery staple"


class TeamFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Team

    name = factory.Sequence(lambda n: f"Team {n}")
    slug = factory.Sequence(lambda n: f"team-{n}")


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        skip_postgeneration_save = True

    username = factory.Sequence(lambda n: f"user{n}")
    password = factory.PostGenerationMethodCall("set_password", PASSWORD)

    @factory.post_generation
    def saved(obj, create, extracted, **kwargs):
        if create:
            obj.save()


def member(team, role, **kwargs):
    user = UserFactory(**kwargs)
    Membership.objects.create(team=team, user=user, role=role)
    return user


__all__ = ["PASSWORD", "Role", "TeamFactory", "UserFactory", "member"]
